package fetch

import (
	"context"
	"errors"
	"time"
)

// MaxRobotsRedirects is how many redirects a robots.txt fetch follows
// (RFC 9309 section 2.3.1.2: at least five).
const MaxRobotsRedirects = 5

// RobotsResult is the outcome of fetching robots.txt.
type RobotsResult struct {
	// Status of the last hop. A 3xx here means the redirect limit was hit
	// or the Location was unusable; ParseRobots treats it as "unavailable".
	Status int
	// Body is the decoded body of the last hop, at most MaxRobotsSize.
	Body []byte
	// FinalURL is the URL of the last hop.
	FinalURL string
	// Redirects is how many redirects were followed.
	Redirects         int
	Started, Finished time.Time
	// RawRequest, RawHeader and RawBody are those of the last hop, for WARC.
	RawRequest, RawHeader, RawBody []byte
	// Hops holds every response in order (the last is the one above), so
	// that each can be archived.
	Hops []*Response
}

// FetchRobots GETs scheme://hostport/robots.txt, following up to
// MaxRobotsRedirects redirects itself (to any host; --resolve applies per
// hop, and the address guard to every hop: a hop it refuses ends the chain at the 3xx
// before it), reading at most MaxRobotsSize. The error is non-nil only for
// transport failures, in which case the caller uses UnreachableRobots.
func (c *Client) FetchRobots(ctx context.Context, scheme, hostport string) (*RobotsResult, error) {
	return c.FetchRobotsDelay(ctx, scheme, hostport, 0)
}

// FetchRobotsDelay is FetchRobots that waits hopDelay after each redirect hop's response
// before it requests the next one: every hop is a request to the host and counts
// against its politeness delay.
func (c *Client) FetchRobotsDelay(ctx context.Context, scheme, hostport string, hopDelay time.Duration) (*RobotsResult, error) {
	u := scheme + "://" + hostport + "/robots.txt"
	if hostport == "" || (scheme != "http" && scheme != "https") {
		return nil, classErr(ClassBadURL, u, errors.New("need http(s) scheme and host"))
	}
	res := &RobotsResult{Started: c.cfg.Now()}
	for {
		resp, err := c.do(ctx, Request{URL: u}, MaxRobotsSize, false)
		if err != nil {
			if res.Redirects > 0 && errors.Is(err, ErrForbiddenAddress) {
				// A redirect to an address the guard refuses is not followed (nothing is
				// sent): the answer is the 3xx, as for an unusable Location.
				res.Redirects--
				return res, nil
			}
			return nil, err
		}
		res.Hops = append(res.Hops, resp)
		res.Status, res.Body, res.FinalURL = resp.Status, resp.Body, u
		res.RawRequest, res.RawHeader, res.RawBody = resp.RawRequest, resp.RawHeader, resp.RawBody
		res.Finished = resp.Finished
		if resp.Status < 300 || resp.Status >= 400 || resp.Location == "" || res.Redirects >= MaxRobotsRedirects {
			return res, nil
		}
		if _, err := parseTarget(resp.Location); err != nil {
			return res, nil // unusable Location: stop at the 3xx
		}
		u = resp.Location
		res.Redirects++
		if hopDelay > 0 {
			wait := time.NewTimer(time.Until(resp.Finished.Add(hopDelay)))
			select {
			case <-ctx.Done():
				wait.Stop()
				return nil, classErr(ClassCanceled, u, ctx.Err())
			case <-wait.C:
			}
		}
	}
}
