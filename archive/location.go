package archive

import (
	"encoding/binary"
	"fmt"
)

// Location is where a record lives: the file name (base name inside Config.Dir) and the offset
// and length of its gzip member in that file. It is the index entry URL -> record that callers
// keep (e.g. in the seen set) to read a page back with ReadResponse.
type Location struct {
	File   string
	Offset int64
	Length int64
}

// locVersion tags the binary form so it can evolve.
const locVersion = 1

// MarshalBinary encodes l compactly: version byte, uvarint offset, uvarint length, uvarint
// name length, name. About 10 bytes plus the file name.
func (l Location) MarshalBinary() ([]byte, error) {
	if l.Offset < 0 || l.Length < 0 {
		return nil, fmt.Errorf("%w: negative location %+v", ErrInvalid, l)
	}
	b := make([]byte, 0, 1+3*binary.MaxVarintLen64+len(l.File))
	b = append(b, locVersion)
	b = binary.AppendUvarint(b, uint64(l.Offset))
	b = binary.AppendUvarint(b, uint64(l.Length))
	b = binary.AppendUvarint(b, uint64(len(l.File)))
	b = append(b, l.File...)
	return b, nil
}

// UnmarshalBinary decodes the form written by MarshalBinary.
func (l *Location) UnmarshalBinary(b []byte) error {
	bad := func(what string) error { return fmt.Errorf("%w: location: %s", ErrCorrupt, what) }
	if len(b) == 0 || b[0] != locVersion {
		return bad("unknown version")
	}
	b = b[1:]
	var vals [3]uint64
	for i := range vals {
		v, n := binary.Uvarint(b)
		if n <= 0 || v > 1<<62 {
			return bad("bad varint")
		}
		vals[i] = v
		b = b[n:]
	}
	if uint64(len(b)) != vals[2] {
		return bad("bad file name length")
	}
	*l = Location{File: string(b), Offset: int64(vals[0]), Length: int64(vals[1])}
	return nil
}
