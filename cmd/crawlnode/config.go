package main

import (
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Every crawl flag can also come from the environment (CRAWLNODE_ and the flag's name in
// upper case with - as _, e.g. CRAWLNODE_MAX_PAGES=1000) and from a YAML config file
// (--config FILE, keys are the flag names: `max-pages: 1000`). Flags win over the
// environment, which wins over the file. Repeatable flags (seed, resolve) take a YAML list
// or, in the environment, values separated by spaces; given on the command line they
// replace what the file or the environment said. An empty variable counts as unset
// (compose files pass CRAWLNODE_DELAY= for a value left out); an empty value is given by
// the flag or the file (--http ''). Duration flags take a bare number as seconds
// (durationFlag).

const envPrefix = "CRAWLNODE_"

func envName(flagName string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// configFileArg finds --config in args without parsing the rest.
func configFileArg(args []string) (string, error) {
	for i, a := range args {
		for _, p := range []string{"--config", "-config"} {
			if a == p {
				if i+1 >= len(args) {
					return "", usageError{"--config needs a file"}
				}
				return args[i+1], nil
			}
			if v, ok := strings.CutPrefix(a, p+"="); ok {
				return v, nil
			}
		}
		if a == "--" {
			break
		}
	}
	return os.Getenv(envName("config")), nil
}

// applyConfigFile sets flags from a YAML file of flag-name keys.
func applyConfigFile(fs *flag.FlagSet, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		return usageError{fmt.Sprintf("config file %s: %v", path, err)}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k == "config" || fs.Lookup(k) == nil {
			return usageError{fmt.Sprintf("config file %s: unknown setting %q", path, k)}
		}
		var vals []string
		switch v := m[k].(type) {
		case []any:
			for _, e := range v {
				vals = append(vals, fmt.Sprint(e))
			}
		case nil:
			continue
		default:
			vals = []string{fmt.Sprint(v)}
		}
		for _, v := range vals {
			if err := fs.Set(k, v); err != nil {
				return usageError{fmt.Sprintf("config file %s: %s: %v", path, k, err)}
			}
		}
	}
	return nil
}

// applyEnv sets flags from CRAWLNODE_* variables; empty ones count as unset.
func applyEnv(fs *flag.FlagSet) error {
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || f.Name == "config" {
			return
		}
		v := os.Getenv(envName(f.Name))
		if v == "" {
			return // unset, or set to nothing: the file's value or the default stands
		}
		vals := []string{v}
		if _, list := f.Value.(*listFlag); list {
			vals = strings.Fields(v)
		}
		for _, one := range vals {
			if e := fs.Set(f.Name, one); e != nil {
				err = usageError{fmt.Sprintf("%s: %v", envName(f.Name), e)}
				return
			}
		}
	})
	return err
}

// flagGroups orders the help output by topic.
var flagGroups = []struct {
	title string
	flags []string
}{
	{"Crawl", []string{"data", "name", "seed", "seeds", "exit-when-done", "max-pages", "config"}},
	{"Scope", []string{"scope", "include", "exclude"}},
	{"Freshness and priority", []string{"recrawl", "recrawl-min", "recrawl-max", "revisit-share", "priority"}},
	{"Politeness", []string{"delay", "per-host", "user-agent", "robots-retry"}},
	{"Limits", []string{"max-depth", "max-pages-per-host", "concurrency", "timeout", "max-body", "retry-base", "min-free-disk", "bounded-memory"}},
	{"Network", []string{"resolve", "allow-ips", "dns", "dns-cache-ttl"}},
	{"Cluster", []string{"name", "bind", "advertise", "raft", "join", "bootstrap-expect", "grace", "replica-interval", "cluster-profile", "internal-http", "cluster-key-file", "tls-ca", "tls-cert", "tls-key", "insecure-cluster"}},
	{"Corpus", []string{"no-extract", "extract-workers", "extract-nice", "extract-defer-idle", "min-text-length", "max-link-density", "languages", "include-opt-out", "no-markdown"}},
	{"Durability", []string{"no-fsync", "sync-interval"}},
	{"Output store", []string{"output-store", "s3-endpoint", "rotate-every", "output-store-max-unshipped", "output-store-retry-max", "delete-after-upload"}},
	{"API and output", []string{"warc-gzip-level", "http", "api-token", "api-read-token", "api-protect-reads", "log-level", "log-format", "quiet", "cpuprofile", "memprofile", "pprof", "goroutine-dump"}},
}

// printGroupedHelp prints every flag under its topic, with its default and environment
// variable; flags of no group come last.
func printGroupedHelp(fs *flag.FlagSet, w *os.File) {
	fmt.Fprintf(w, "Usage: crawlnode %s [flags]\n\nEvery flag can also be set as %sNAME in the environment or as NAME in a YAML file given with --config (flags win over the environment, which wins over the file; an empty variable counts as unset).\nA duration takes a unit (500ms, 1s, 5m, 6h) or is a bare number of seconds (0.5 = 500ms), except --recrawl-min and --recrawl-max, which need a unit.\n", fs.Name(), envPrefix)
	seen := map[string]bool{}
	show := func(f *flag.Flag) {
		seen[f.Name] = true
		name, usage := flag.UnquoteUsage(f)
		if _, ok := f.Value.(*durationFlag); ok {
			name = "duration"
		}
		fmt.Fprintf(w, "  --%s %s\n    \t%s", f.Name, name, usage)
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "[]" {
			fmt.Fprintf(w, " (default %s)", f.DefValue)
		}
		fmt.Fprintf(w, " [%s]\n", envName(f.Name))
	}
	for _, g := range flagGroups {
		fmt.Fprintf(w, "\n%s:\n", g.title)
		for _, n := range g.flags {
			if f := fs.Lookup(n); f != nil {
				show(f)
			}
		}
	}
	first := true
	fs.VisitAll(func(f *flag.Flag) {
		if seen[f.Name] {
			return
		}
		if first {
			fmt.Fprintf(w, "\nOther:\n")
			first = false
		}
		show(f)
	})
}
