package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// runKeyring is `crawlnode keyring`, as `consul keyring`: --list shows every member's key
// fingerprints; --install KEY, --use KEY, --remove KEY run one step of a rotation on every
// alive member through the node's API (from the node's own machine: the API takes key
// changes only over loopback). KEY is the base64 key, or @FILE to read it from a file.
//
//	crawlnode keyring --install @new.key   every member can read messages under it
//	crawlnode keyring --use @new.key       every member sends under it
//	crawlnode keyring --remove @old.key    the old key is gone everywhere
func runKeyring(args []string) error {
	fs := flag.NewFlagSet("keyring", flag.ContinueOnError)
	api := fs.String("api", envOr("CRAWLNODE_API", "http://127.0.0.1:7070"), "the node's API address (on this machine)")
	token := fs.String("api-token", os.Getenv("CRAWLNODE_API_TOKEN"), "the API token")
	list := fs.Bool("list", false, "list every member's key fingerprints (the primary first)")
	install := fs.String("install", "", "install KEY (base64, or @FILE) on every member")
	use := fs.String("use", "", "make the installed KEY the primary on every member")
	remove := fs.String("remove", "", "remove KEY from every member (not the primary)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var op, key string
	n := 0
	for _, o := range []struct{ name, val string }{{"install", *install}, {"use", *use}, {"remove", *remove}} {
		if o.val != "" {
			op, key = o.name, o.val
			n++
		}
	}
	if *list {
		n++
	}
	if n != 1 {
		return usageError{"keyring: give exactly one of --list, --install KEY, --use KEY, --remove KEY"}
	}
	if k, ok := strings.CutPrefix(key, "@"); ok {
		b, err := os.ReadFile(k)
		if err != nil {
			return fmt.Errorf("keyring: %w", err)
		}
		key = strings.TrimSpace(string(b))
	}
	method, body := http.MethodGet, []byte(nil)
	if op != "" {
		method = http.MethodPost
		body, _ = json.Marshal(map[string]string{"op": op, "key": key})
	}
	req, err := http.NewRequest(method, strings.TrimRight(*api, "/")+"/v1/keyring", bytes.NewReader(body))
	if err != nil {
		return usageError{fmt.Sprintf("keyring: --api %q: %v", *api, err)}
	}
	req.Header.Set("Content-Type", "application/json")
	if *token != "" {
		req.Header.Set("Authorization", "Bearer "+*token)
	}
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("keyring: %w", err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var res struct {
		Members []struct {
			Name  string   `json:"name"`
			Keys  []string `json:"keys"`
			Error string   `json:"error"`
		} `json:"members"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal(out, &res); err != nil || (res.Members == nil && res.Error == "") {
		return fmt.Errorf("keyring: HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(out))
	}
	for _, m := range res.Members {
		if m.Error != "" {
			fmt.Printf("%s\tFAILED: %s\n", m.Name, m.Error)
			continue
		}
		fmt.Printf("%s\t%s\n", m.Name, strings.Join(m.Keys, " "))
	}
	if res.Error != "" {
		return fmt.Errorf("keyring: %s", res.Error)
	}
	return nil
}
