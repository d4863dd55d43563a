package archive

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"time"
)

// fileName formats <prefix>-<yyyymmddhhmmss>-<seq5>-<node>.warc.gz.
func fileName(prefix, node string, t time.Time, seq int) string {
	return fmt.Sprintf("%s-%s-%05d-%s.warc.gz", prefix, t.UTC().Format("20060102150405"), seq, node)
}

var fileNameRE = regexp.MustCompile(`^(.+)-(\d{14})-(\d{5,})-([A-Za-z0-9._-]+)\.warc\.gz$`)

// parsedName is a file name of ours split into its parts.
type parsedName struct {
	name, prefix, node string
	seq                int
}

// parseFileName splits a file name; ok is false for names that are not ours.
func parseFileName(name string) (parsedName, bool) {
	m := fileNameRE.FindStringSubmatch(name)
	if m == nil {
		return parsedName{}, false
	}
	seq, err := strconv.Atoi(m[3])
	if err != nil {
		return parsedName{}, false
	}
	return parsedName{name: name, prefix: m[1], seq: seq, node: m[4]}, true
}

// planFiles picks, from the names in a directory, the newest file of (prefix, node) — the one
// with the highest sequence number, "" if none — and the next free sequence number for prefix
// (over all nodes, so two nodes sharing a directory never collide on a name).
func planFiles(names []string, prefix, node string) (newest string, nextSeq int) {
	var ours []parsedName
	for _, n := range names {
		p, ok := parseFileName(n)
		if !ok || p.prefix != prefix {
			continue
		}
		if p.seq >= nextSeq {
			nextSeq = p.seq + 1
		}
		if p.node == node {
			ours = append(ours, p)
		}
	}
	if len(ours) == 0 {
		return "", nextSeq
	}
	sort.Slice(ours, func(i, j int) bool {
		if ours[i].seq != ours[j].seq {
			return ours[i].seq < ours[j].seq
		}
		return ours[i].name < ours[j].name
	})
	return ours[len(ours)-1].name, nextSeq
}

// FileNode returns the node name in a WARC file name of ours
// (<prefix>-<yyyymmddhhmmss>-<seq5>-<node>.warc.gz); ok is false for other names.
func FileNode(name string) (node string, ok bool) {
	p, ok := parseFileName(name)
	return p.node, ok
}
