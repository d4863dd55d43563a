package node

// The operator's side of a cluster key rotation: GET /v1/keyring lists every member's
// key fingerprints; POST /v1/keyring {"op": "install"|"use"|"remove", "key": BASE64}
// runs one step on every alive member (cluster.Keyring). A change carries a key, and the
// public API is plain HTTP, so it is taken only from a loopback client (run crawlnode
// keyring on the node's machine, or in its container) and, with an API token, only with
// it.

import (
	"encoding/json"
	"io"
	"net"
	"net/http"

	"github.com/crawlnode/crawlnode/api"
	"github.com/crawlnode/crawlnode/cluster"
)

// KeyringPath is the operator's keyring endpoint.
const KeyringPath = "/v1/keyring"

func (n *Node) keyringHandler() http.Handler {
	return api.Guard(n.apiConfig(), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.cluster == nil || !n.cluster.Started() {
			writeError(w, http.StatusServiceUnavailable, "starting", "the node is still joining its cluster")
			return
		}
		var op string
		var key []byte
		switch r.Method {
		case http.MethodGet:
		case http.MethodPost:
			host, _, _ := net.SplitHostPort(r.RemoteAddr)
			if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
				writeError(w, http.StatusForbidden, "keyring_refused", "keyring changes carry the key: send them from the node's own machine (loopback), not over the network")
				return
			}
			var req cluster.KeyringRequest
			if err := json.NewDecoder(io.LimitReader(r.Body, 4<<10)).Decode(&req); err != nil {
				writeError(w, http.StatusBadRequest, "bad_body", "%v", err)
				return
			}
			k, err := cluster.ParseKey(req.Key)
			if err != nil {
				writeError(w, http.StatusBadRequest, "bad_key", "%v", err)
				return
			}
			op, key = req.Op, k
			switch op {
			case cluster.KeyInstall, cluster.KeyUse, cluster.KeyRemove:
			default:
				writeError(w, http.StatusBadRequest, "bad_op", "op %q: want install, use or remove", op)
				return
			}
		default:
			w.Header().Set("Allow", "GET, POST")
			writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "GET or POST")
			return
		}
		members, err := n.cluster.Keyring(r.Context(), op, key)
		status := http.StatusOK
		if err != nil {
			status = http.StatusBadGateway
		}
		writeJSON(w, status, map[string]any{"members": members, "error": errString(err)})
	}))
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
