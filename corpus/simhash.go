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

// NormalizeText returns the form of s used for the exact content hash:
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

// The near-duplicate fingerprint.
//
// A textbook SimHash (Charikar) of 3-word shingles, the first version here, moves a bit with
// probability about arccos(cosine)/pi: with 2% of the words of a text replaced (simweb's
// near-duplicates) some 6% of the shingles change, and only 9% of such pairs stayed within the
// index's 3 bits (measured on simweb's 339 planted pairs of the default profile). Three changes
// fix that, with the same 64-bit fingerprint, Manku index and distance 3:
//
//   - b-bit MinHash instead of SimHash: each bit is derived from the minimum feature hash in one
//     of 64 bins (one-permutation hashing, Li, Owen and Zhang 2012; empty bins borrow from the
//     next non-empty bin, Shrivastava and Li 2014). A bit differs with probability (1-J)/2, J
//     the Jaccard similarity of the feature sets: linear in the change, not its square root.
//   - Features that one replaced word touches once, not three times: every word with its place
//     in its sentence (word, its offset, the sentence's length, the previous sentence's length).
//     Replacing a word changes one feature; inserting or deleting one changes the features of its
//     sentence and the next. The lengths keep unrelated texts apart (a word at the same offset of
//     a sentence of the same length after one of the same length is rare), which plain word
//     features would not do for texts of one vocabulary.
//   - Biased bits: a bit is 1 with probability 0.3, not 1/2. Two texts whose bin minima
//     differ then differ in that bit with probability 2*0.3*0.7 = 0.42 instead of 0.5, which
//     scales the near-duplicates' expected distance by 0.84 and keeps unrelated texts apart: they
//     land within 3 bits with probability 1.2e-11 a pair (2.4e-15 unbiased; 8.4e-10 at 0.25).
//
// Sentences end at '.', '!', '?', '…' and their CJK and Arabic/Devanagari forms; case, other
// punctuation, whitespace and layout do not count. A run past maxSentenceWords words without an
// end mark (lists, tables, unpunctuated text) also ends at a content-defined word (one whose hash
// is 0 mod cutEvery), or at hardSentenceWords, so that an edit there stays local.
//
// Measured on simweb (default profile; the planted near-duplicate pairs, 336-339 a rate, at edit
// rates 1/2/3/5%; 2,950 unrelated article texts = 4.35M pairs): share of near pairs within 3
// bits 1.000/0.982/0.971/0.758 (3-word SimHash: 0.318/0.086/-/0.018; unbiased bits
// 0.994/0.971/0.891/0.664); unrelated pairs within 3 bits: none, the closest at 8 bits. It is
// also about twice as fast as SimHash(text) was (one hash a word, no per-bit votes): 12 us for
// 400 words, 77 us for 2,885 (was 24 and 173). The price: an inserted or deleted word, or a
// moved sentence end, changes a sentence or two where shingles changed three features.

const bitOneShare = 0.3

var bitOne = func() uint64 { f := bitOneShare; return uint64(f * (1 << 64)) }()

const (
	fpBins            = 64
	maxSentenceWords  = 40
	hardSentenceWords = 128
	cutEvery          = 8
)

// SimHash returns the text's 64-bit near-duplicate fingerprint (see above): similar texts get
// fingerprints at a small Hamming distance; texts that differ only in case, layout or
// punctuation other than sentence ends get the same one; the empty text gets 0. The name is
// kept for the Record field and the index; the function is a one-permutation b-bit MinHash.
func SimHash(text string) uint64 {
	if !norm.NFC.IsNormalString(text) {
		text = norm.NFC.String(text)
	}
	var f fingerprinter
	f.init()
	var word []byte
	endWord := func() {
		if len(word) > 0 {
			f.word(xxhash.Sum64(word))
			word = word[:0]
		}
	}
	for _, r := range text {
		switch {
		case r < utf8.RuneSelf && ('a' <= r && r <= 'z' || '0' <= r && r <= '9'):
			word = append(word, byte(r))
		case r < utf8.RuneSelf && 'A' <= r && r <= 'Z':
			word = append(word, byte(r+'a'-'A'))
		case unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			word = utf8.AppendRune(word, unicode.ToLower(r))
		default:
			endWord()
			if sentenceEnd(r) {
				f.endSentence()
			}
		}
	}
	endWord()
	f.endSentence()
	return f.sum()
}

func sentenceEnd(r rune) bool {
	switch r {
	case '.', '!', '?', '\u2026', '\u3002', '\uff01', '\uff1f', '\uff0e', '\u061f', '\u06d4', '\u0964', '\u0965':
		return true
	}
	return false
}

// fingerprinter collects a sentence's word hashes, turns them into features and keeps the
// minimum feature of each bin.
type fingerprinter struct {
	sentence []uint64
	prevLen  uint64
	buf      [hardSentenceWords]uint64
	mins     [fpBins]uint64
	any      bool
}

func (f *fingerprinter) init() {
	f.sentence = f.buf[:0]
	for i := range f.mins {
		f.mins[i] = ^uint64(0)
	}
}

func (f *fingerprinter) word(h uint64) {
	f.sentence = append(f.sentence, h)
	n := len(f.sentence)
	if n >= hardSentenceWords || n >= maxSentenceWords && h%cutEvery == 0 {
		f.endSentence()
	}
}

func (f *fingerprinter) endSentence() {
	n := uint64(len(f.sentence))
	if n == 0 {
		return
	}
	for i, h := range f.sentence {
		feat := mix64(h ^ mix64(f.prevLen<<40|n<<20|uint64(i)))
		bin := feat >> 58
		if v := feat << 6; v < f.mins[bin] {
			f.mins[bin] = v
		}
	}
	f.any = true
	f.prevLen = n
	f.sentence = f.sentence[:0]
}

// sum derives one bit from each bin's minimum (set with probability bitOneShare); an empty bin
// uses the next non-empty bin's minimum mixed with the distance to it (rotation densification).
func (f *fingerprinter) sum() uint64 {
	if !f.any {
		return 0
	}
	var fp uint64
	for j := 0; j < fpBins; j++ {
		m := f.mins[j]
		for k := 1; m == ^uint64(0); k++ {
			if mm := f.mins[(j+k)%fpBins]; mm != ^uint64(0) {
				m = mm ^ uint64(k)*0x9e3779b97f4a7c15
			}
		}
		if mix64(m^uint64(j)*0xc4ceb9fe1a85ec53) < bitOne {
			fp |= 1 << uint(j)
		}
	}
	return fp
}

// mix64 is the splitmix64 / murmur3 finalizer: every input bit flips each output bit with
// probability about 1/2.
func mix64(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// Hamming is the number of bits in which a and b differ.
func Hamming(a, b uint64) int { return bits.OnesCount64(a ^ b) }
