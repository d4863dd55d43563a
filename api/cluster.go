package api

import "net/http"

func (s *server) cluster(w http.ResponseWriter, r *http.Request) {
	view, err := s.backend.Cluster()
	if err != nil {
		writeErr(w, err, "")
		return
	}
	WriteJSON(w, http.StatusOK, view)
}

// leave is POST /v1/node/leave: decommission this node.
func (s *server) leave(w http.ResponseWriter, r *http.Request) {
	if err := s.backend.Leave(); err != nil {
		writeErr(w, err, "")
		return
	}
	WriteJSON(w, http.StatusAccepted, map[string]string{"node": s.backend.Name(), "status": "draining"})
}
