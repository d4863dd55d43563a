package keyspace

import "testing"

// TestFamiliesDistinct: no two families share a byte, so no package's prefix scan or
// DropPrefix can reach another's keys.
func TestFamiliesDistinct(t *testing.T) {
	owner := map[byte]string{}
	for _, f := range Families {
		if prev, ok := owner[f.Byte]; ok {
			t.Errorf("family %q claimed by %s and %s", f.Byte, prev, f.Owner)
		}
		owner[f.Byte] = f.Owner
		if f.Owner == "" || f.Holds == "" {
			t.Errorf("family %q: owner and contents must be named", f.Byte)
		}
	}
}
