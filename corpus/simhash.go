package corpus

import (
	"crypto/sha256"
	"encoding/hex"
	"math/bits"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/cespare/xxhash/v2"
	"golang.org/x/text/unicode/norm"
)

// ShingleWords is the number of consecutive words hashed together as one SimHash feature.
const ShingleWords = 3

// NormalizeText returns the form of s used for the exact content hash and for SimHash:
// Unicode NFC, lower-case, every run of characters that are neither letters, digits nor
// combining marks (punctuation, symbols, whitespace) collapsed to one space, trimmed.
// Two texts that differ only in case, punctuation or layout normalize to the same string.
func NormalizeText(s string) string {
	if !norm.NFC.IsNormalString(s) {
		s = norm.NFC.String(s)
	}
	var b strings.Builder
	b.Grow(len(s))
	pendingSpace := false
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r) {
			if pendingSpace && b.Len() > 0 {
				b.WriteByte(' ')
			}
			pendingSpace = false
			if r < utf8.RuneSelf {
				if 'A' <= r && r <= 'Z' {
					r += 'a' - 'A'
				}
				b.WriteByte(byte(r))
			} else {
				b.WriteRune(unicode.ToLower(r))
			}
			continue
		}
		pendingSpace = true
	}
	return b.String()
}

// ContentHash is the hex SHA-256 of NormalizeText(text): the key for exact duplicates.
func ContentHash(text string) string {
	return contentHashNormalized(NormalizeText(text))
}

func contentHashNormalized(normalized string) string {
	sum := sha256.Sum256([]byte(normalized))
	return hex.EncodeToString(sum[:])
}

// SimHash is the 64-bit SimHash (Charikar) of text: every shingle of ShingleWords consecutive
// words of NormalizeText(text) is hashed with xxhash64 and votes +1/-1 on each of the 64 bits;
// a bit is set when its votes are positive. A text of fewer words than a shingle is one
// feature; the empty text hashes to 0. Similar texts get fingerprints at a small Hamming distance.
func SimHash(text string) uint64 {
	return simHashNormalized(NormalizeText(text))
}

// spreadBits[b] holds bit k of b in byte k, so that adding spreadBits of a hash's bytes counts
// eight bit positions with one addition.
var spreadBits = func() (t [256]uint64) {
	for b := range t {
		for k := 0; k < 8; k++ {
			t[b] |= uint64(b>>k&1) << (8 * k)
		}
	}
	return t
}()

// bitVotes counts, for each of the 64 bit positions, how many feature hashes have it set.
// Counts go into byte lanes (eight positions per uint64) and are spilled before a lane can
// overflow: 8 additions a feature instead of 64 branches.
type bitVotes struct {
	lanes    [8]uint64
	inLanes  int
	ones     [64]int32
	features int32
}

func (v *bitVotes) add(h uint64) {
	for j := 0; j < 8; j++ {
		v.lanes[j] += spreadBits[byte(h>>(8*j))]
	}
	v.features++
	if v.inLanes++; v.inLanes == 255 {
		v.spill()
	}
}

func (v *bitVotes) spill() {
	for j := 0; j < 8; j++ {
		l := v.lanes[j]
		for k := 0; k < 8; k++ {
			v.ones[8*j+k] += int32(l >> (8 * k) & 0xff)
		}
		v.lanes[j] = 0
	}
	v.inLanes = 0
}

// sum sets bit i when more features have it set than not (a vote of +1/-1 per feature).
func (v *bitVotes) sum() uint64 {
	v.spill()
	var h uint64
	for i := 0; i < 64; i++ {
		if 2*v.ones[i] > v.features {
			h |= 1 << uint(i)
		}
	}
	return h
}

func simHashNormalized(normalized string) uint64 {
	if normalized == "" {
		return 0
	}
	var votes bitVotes
	// Word boundaries: normalized text has single spaces between words.
	var starts [ShingleWords + 1]int // ring of start offsets of the last words
	words := 0
	pos := 0
	for pos <= len(normalized) {
		end := strings.IndexByte(normalized[pos:], ' ')
		if end < 0 {
			end = len(normalized)
		} else {
			end += pos
		}
		starts[words%(ShingleWords+1)] = pos
		words++
		if words >= ShingleWords {
			first := starts[(words-ShingleWords)%(ShingleWords+1)]
			votes.add(xxhash.Sum64String(normalized[first:end]))
		}
		pos = end + 1
	}
	if words < ShingleWords {
		votes.add(xxhash.Sum64String(normalized))
	}
	return votes.sum()
}

// Hamming is the number of bits in which a and b differ.
func Hamming(a, b uint64) int { return bits.OnesCount64(a ^ b) }
