package corpus

import (
	"strings"
)

// robotsDirectives holds what one X-Robots-Tag / meta robots source says about us.
type robotsDirectives struct {
	noIndex bool
	noAI    bool
}

// Directive names that take a "name: value" form and so must not be read as a user-agent token.
var robotsValuedDirectives = map[string]bool{
	"unavailable_after": true, "max-snippet": true, "max-image-preview": true, "max-video-preview": true,
}

// parseRobotsDirectives reads one X-Robots-Tag header value (or a meta robots content) and
// returns the directives that apply to the product token. Items are comma-separated; an item
// "<ua>: <directive>" switches the user agent for the items that follow (the Google form
// "googlebot: noindex, nofollow"). Directives for other user agents are ignored; directives
// without a user agent apply to everyone. "none" means noindex, nofollow.
func parseRobotsDirectives(value, token string, d *robotsDirectives) {
	applies := true
	for _, item := range strings.Split(value, ",") {
		item = strings.ToLower(strings.TrimSpace(item))
		if i := strings.IndexByte(item, ':'); i > 0 {
			name := strings.TrimSpace(item[:i])
			if !robotsValuedDirectives[name] && !strings.ContainsAny(name, " \t") {
				applies = name == token
				item = strings.TrimSpace(item[i+1:])
			}
		}
		if !applies {
			continue
		}
		switch item {
		case "noindex", "none":
			d.noIndex = true
		case "noai":
			d.noAI = true
		}
	}
}

// tdmReserved reports whether a tdm-reservation value (header or meta) reserves the rights:
// the TDMRep value is "1" (reserved) or "0" (not reserved).
func tdmReserved(v string) bool { return strings.TrimSpace(v) == "1" }

// pageSignals are the opt-out facts read from the page's DOM.
type pageSignals struct {
	robots         robotsDirectives
	tdmReservation string // <meta name="tdm-reservation">
	tdmPolicy      string // <meta name="tdm-policy">
}

// optOutSignals combines the response headers, the page's meta tags and the host's
// tdmrep.json into the sorted list of opt-out signals. A reservation in any of the three
// sources counts (the most cautious reading where they disagree).
func optOutSignals(j *Job, page *pageSignals, token string) []string {
	var d robotsDirectives
	for _, v := range j.XRobotsTag {
		parseRobotsDirectives(v, token, &d)
	}
	tdm := j.HostTDMReserved || tdmReserved(j.TDMReservation)
	if page != nil {
		d.noIndex = d.noIndex || page.robots.noIndex
		d.noAI = d.noAI || page.robots.noAI
		tdm = tdm || tdmReserved(page.tdmReservation)
	}
	var out []string
	if d.noAI {
		out = append(out, OptOutNoAI)
	}
	if d.noIndex {
		out = append(out, OptOutNoIndex)
	}
	if tdm {
		out = append(out, OptOutTDMReservation)
	}
	return out
}
