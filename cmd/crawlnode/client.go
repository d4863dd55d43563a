package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// The API wrappers for the shell: status, cluster, seed, block, unblock, pause, resume,
// leave (decommission the node the API belongs to). Each takes
// --api URL (default http://127.0.0.1:7070, or CRAWLNODE_API) and --api-token (or
// CRAWLNODE_API_TOKEN; for the reads, status and cluster, --api-read-token or
// CRAWLNODE_API_READ_TOKEN does too) and prints the node's JSON answer.

func runClient(cmd string, args []string) error {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	api := fs.String("api", envOr("CRAWLNODE_API", "http://127.0.0.1:7070"), "the node's API address")
	token := fs.String("api-token", os.Getenv("CRAWLNODE_API_TOKEN"), "the operator's bearer token (writes, and every read)")
	readToken := fs.String("api-read-token", os.Getenv("CRAWLNODE_API_READ_TOKEN"), "a read-only bearer token, used by status and cluster when --api-token is not given")
	priority := fs.String("priority", "normal", "seed: high or normal")
	// Flags may follow the positional arguments (crawlnode seed URL --api X).
	var pos []string
	rest := args
	for {
		if err := parseFlagsAllowArgs(fs, rest); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	base := strings.TrimRight(*api, "/")
	if _, err := url.ParseRequestURI(base); err != nil {
		return usageError{fmt.Sprintf("%s: --api %q is not a URL", cmd, *api)}
	}
	var method, path string
	var body []byte
	switch cmd {
	case "status":
		method, path = http.MethodGet, "/v1/crawl/status"
	case "pause", "resume":
		method, path = http.MethodPost, "/v1/crawl/"+cmd
	case "leave":
		method, path = http.MethodPost, "/v1/node/leave"
	case "cluster":
		method, path = http.MethodGet, "/v1/cluster"
	case "block", "unblock":
		if len(pos) != 1 {
			return usageError{fmt.Sprintf("%s: give one domain", cmd)}
		}
		method, path = http.MethodPost, "/v1/domains/"+url.PathEscape(pos[0])+"/block"
		if cmd == "unblock" {
			method = http.MethodDelete
		}
	case "seed":
		if len(pos) == 0 {
			return usageError{"seed: give one or more URLs"}
		}
		body, _ = json.Marshal(map[string]any{"urls": pos, "priority": *priority})
		method, path = http.MethodPost, "/v1/crawl/seeds"
	}
	req, err := http.NewRequest(method, base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	switch {
	case *token != "":
		req.Header.Set("Authorization", "Bearer "+*token)
	case method == http.MethodGet && *readToken != "":
		req.Header.Set("Authorization", "Bearer "+*readToken)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", cmd, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if resp.StatusCode >= 400 {
		var e struct{ Error string }
		if json.Unmarshal(out, &e) == nil && e.Error != "" {
			return fmt.Errorf("%s: %s (HTTP %d)", cmd, e.Error, resp.StatusCode)
		}
		return fmt.Errorf("%s: HTTP %d", cmd, resp.StatusCode)
	}
	if len(out) > 0 {
		os.Stdout.Write(out)
	} else {
		fmt.Printf("%s: ok\n", cmd)
	}
	return nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// parseFlagsAllowArgs parses flags, leaving positional arguments in fs.Args().
func parseFlagsAllowArgs(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			fmt.Fprintf(os.Stdout, "Usage of crawlnode %s:\n", fs.Name())
			fs.SetOutput(os.Stdout)
			fs.PrintDefaults()
			return errHelp
		}
		return usageError{err.Error()}
	}
	return nil
}
