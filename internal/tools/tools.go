//go:build tools

package tools

import (
	_ "github.com/andybalholm/brotli"
	_ "github.com/bits-and-blooms/bloom/v3"
	_ "github.com/buraksezer/consistent"
	_ "github.com/cespare/xxhash/v2"
	_ "github.com/dgraph-io/badger/v4"
	_ "github.com/hashicorp/memberlist"
	_ "github.com/hashicorp/raft"
	_ "github.com/hashicorp/raft-wal"
	_ "github.com/jimsmart/grobotstxt"
	_ "github.com/klauspost/compress/zstd"
	_ "github.com/markusmobius/go-trafilatura"
	_ "github.com/nlnwa/gowarc"
	_ "github.com/nlnwa/whatwg-url/url"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/valyala/fasthttp"
	_ "go.uber.org/goleak"
	_ "golang.org/x/net/html"
)
