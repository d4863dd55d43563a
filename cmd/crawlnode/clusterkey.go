package main

// The cluster key, read in this one place (--cluster-key-file, or CRAWLNODE_CLUSTER_KEY).
// The gossip layer's keyring takes the same keys: base64 of 16, 24 or 32 random bytes
// (as `consul keygen` writes), one a line, the primary first; more lines are keys being
// rotated in or out, accepted but not used to sign.

import (
	"encoding/base64"
	"fmt"
	"os"
	"strings"
)

// clusterKeyEnv carries the key itself (a file is better: the environment leaks into
// process listings and crash reports).
const clusterKeyEnv = "CRAWLNODE_CLUSTER_KEY"

// loadClusterKeys reads the keyring from file, else from CRAWLNODE_CLUSTER_KEY; none:
// nil (the development mode).
func loadClusterKeys(file string) ([][]byte, error) {
	text := os.Getenv(clusterKeyEnv)
	src := clusterKeyEnv
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("--cluster-key-file: %w", err)
		}
		text, src = string(b), file
	}
	return parseClusterKeys(text, src)
}

// parseClusterKeys decodes one base64 key a line (blank lines and # comments skipped).
func parseClusterKeys(text, src string) ([][]byte, error) {
	var keys [][]byte
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, err := base64.StdEncoding.DecodeString(line)
		if err != nil {
			return nil, fmt.Errorf("%s line %d: a cluster key is base64 of 32 random bytes (openssl rand -base64 32): %v", src, i+1, err)
		}
		if n := len(k); n != 16 && n != 24 && n != 32 {
			return nil, fmt.Errorf("%s line %d: a cluster key is 16, 24 or 32 bytes, got %d", src, i+1, n)
		}
		keys = append(keys, k)
	}
	if text != "" && len(keys) == 0 {
		return nil, fmt.Errorf("%s: no key in it", src)
	}
	return keys, nil
}
