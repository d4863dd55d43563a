package linkscan

import "strings"

// crawlerToken is the crawler's own robots name (meta name and X-Robots-Tag
// scope), matched case-insensitively.
const crawlerToken = "crawlnode"

type directives struct {
	noIndex, noFollow, noAI, noImageAI bool
}

// parseDirectives reads a robots directive list: tokens separated by commas
// and/or white space, case-insensitive. Unknown tokens are ignored.
func parseDirectives(v []byte) directives {
	var d directives
	for len(v) > 0 {
		i := 0
		for i < len(v) && (isSpace(v[i]) || v[i] == ',') {
			i++
		}
		j := i
		for j < len(v) && !isSpace(v[j]) && v[j] != ',' {
			j++
		}
		d.apply(v[i:j])
		v = v[j:]
	}
	return d
}

func (d *directives) apply(tok []byte) {
	switch {
	case equalFold(tok, "noindex"):
		d.noIndex = true
	case equalFold(tok, "nofollow"):
		d.noFollow = true
	case equalFold(tok, "none"):
		d.noIndex, d.noFollow = true, true
	case equalFold(tok, "noai"):
		d.noAI = true
	case equalFold(tok, "noimageai"):
		d.noImageAI = true
	}
}

// valueDirectives are X-Robots-Tag directives of the form "name: value";
// their name must not be read as a crawler name.
var valueDirectives = []string{"unavailable_after", "max-snippet", "max-image-preview", "max-video-preview"}

// HeaderSignals reads the X-Robots-Tag response header values (one entry per
// header line) and the tdm-reservation header. A value may hold several
// comma-separated directives and "name:" prefixes that scope the directives
// after them to one crawler ("googlebot: noindex"); unscoped directives and
// those scoped to "crawlnode" apply.
func HeaderSignals(xRobotsTag []string, tdmReservation string) (noIndex, noFollow, noAI, tdmReserved bool) {
	var d directives
	for _, h := range xRobotsTag {
		applies := true // until a "name:" prefix says otherwise
		for part := range strings.SplitSeq(h, ",") {
			part = strings.TrimSpace(part)
			if i := strings.IndexByte(part, ':'); i >= 0 {
				name := strings.ToLower(strings.TrimSpace(part[:i]))
				if isValueDirective(name) {
					continue
				}
				applies = name == crawlerToken
				part = part[i+1:]
			}
			if applies {
				pd := parseDirectives([]byte(part))
				d.noIndex = d.noIndex || pd.noIndex
				d.noFollow = d.noFollow || pd.noFollow
				d.noAI = d.noAI || pd.noAI
			}
		}
	}
	tdmReserved = strings.TrimSpace(tdmReservation) == "1"
	return d.noIndex, d.noFollow, d.noAI, tdmReserved
}

func isValueDirective(name string) bool {
	for _, v := range valueDirectives {
		if name == v {
			return true
		}
	}
	return false
}
