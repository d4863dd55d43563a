package simweb

import "math"

// rng is a splitmix64 generator: tiny, fast and stable across Go releases, so the same seed
// gives the same web forever.
type rng struct{ s uint64 }

func newRng(seed uint64) *rng { return &rng{s: seed} }

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func (r *rng) intn(n int) int {
	if n <= 0 {
		return 0
	}
	return int(r.next() % uint64(n))
}

func (r *rng) float() float64 { return float64(r.next()>>11) / (1 << 53) }

// pareto draws from a Pareto distribution with minimum 1 and shape alpha.
func (r *rng) pareto(alpha float64) float64 {
	return math.Pow(1-r.float(), -1/alpha)
}

// mix hashes a list of numbers into one seed.
func mix(vals ...uint64) uint64 {
	h := uint64(0x243f6a8885a308d3)
	for _, v := range vals {
		h ^= v + 0x9e3779b97f4a7c15 + (h << 6) + (h >> 2)
		h = (h ^ (h >> 31)) * 0x7fb5d329728ea185
		h = (h ^ (h >> 27)) * 0x81dadef4bc2dd44d
		h ^= h >> 33
	}
	return h
}
