package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// durationFlag is a duration flag that also takes a bare number of seconds, as robots.txt's
// Crawl-delay, wget's --wait and Scrapy's DOWNLOAD_DELAY do: --delay 0.5 is 500ms. Flags
// whose values are hours to months (--recrawl-min, --recrawl-max) set unitRequired: there
// a bare "6" could as well mean hours or days, so it is refused with what is expected.
type durationFlag struct {
	d            *time.Duration
	unitRequired bool
	examples     string // shown in the error: "1s, 500ms"
	failed       error  // the last Set's error, for the command line's message
}

func (v *durationFlag) String() string {
	if v == nil || v.d == nil {
		return ""
	}
	return v.d.String()
}

// Set parses s. Its error says what is expected; the caller names the flag, the variable
// or the config file.
func (v *durationFlag) Set(s string) error {
	d, err := parseDuration(strings.TrimSpace(s), v.unitRequired)
	switch {
	case err == nil:
		*v.d, v.failed = d, nil
	case v.unitRequired:
		v.failed = fmt.Errorf("want a duration with a unit such as %s (a bare number is ambiguous here); got %q", v.examples, s)
	default:
		v.failed = fmt.Errorf("want a duration such as %s or a number of seconds such as 0.5; got %q", v.examples, s)
	}
	return v.failed
}

// parseDuration reads a Go duration ("1m30s"), or, unless unitRequired, a bare decimal
// number of seconds ("0.5", "2", "-1").
func parseDuration(s string, unitRequired bool) (time.Duration, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return d, nil
	}
	if unitRequired {
		return 0, fmt.Errorf("not a duration")
	}
	x, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(x) || math.IsInf(x, 0) || strings.ContainsAny(s, "xXpP_") {
		return 0, fmt.Errorf("not a duration or a number of seconds")
	}
	ns := math.Round(x * float64(time.Second))
	if ns > math.MaxInt64 || ns < math.MinInt64 {
		return 0, fmt.Errorf("out of range")
	}
	return time.Duration(ns), nil
}

// durationError is the command line's message for a bad duration flag: flag.Parse's own
// ("invalid value ... for flag -delay: ...") says the value twice and names the flag with
// one dash.
func (f *crawlFlags) durationError() error {
	for name, v := range f.durations {
		if v.failed != nil {
			return usageError{fmt.Sprintf("--%s: %v", name, v.failed)}
		}
	}
	return nil
}

// durationVar defines a duration flag that takes a bare number of seconds too.
func (f *crawlFlags) durationVar(p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	v := &durationFlag{d: p, examples: "1s, 500ms"}
	f.durations[name] = v
	f.fs.Var(v, name, usage)
}

// longDurationVar defines a duration flag of hours to months that needs a unit.
func (f *crawlFlags) longDurationVar(p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	v := &durationFlag{d: p, unitRequired: true, examples: "6h or 720h"}
	f.durations[name] = v
	f.fs.Var(v, name, usage)
}
