package control

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func srv(id string, voter bool) raft.Server {
	s := raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(id + ":7000"), Suffrage: raft.Nonvoter}
	if voter {
		s.Suffrage = raft.Voter
	}
	return s
}

func peer(id string) Peer { return Peer{Name: id, RaftAddr: id + ":7000", HTTPAddr: id + ":8080"} }

func peers(ids ...string) []Peer {
	out := make([]Peer, len(ids))
	for i, id := range ids {
		out[i] = peer(id)
	}
	return out
}

func TestVoterTarget(t *testing.T) {
	c := Config{}
	for n, want := range map[int]int{0: 0, 1: 1, 2: 1, 3: 3, 4: 3, 6: 3, 7: 5, 20: 5} {
		if got := c.VoterTarget(n); got != want {
			t.Errorf("VoterTarget(%d) = %d, want %d", n, got, want)
		}
	}
	if got := (Config{Voters: 5, LargeClusterSize: -1}).VoterTarget(100); got != 5 {
		t.Errorf("explicit 5 voters: %d", got)
	}
}

func TestPlanReconcile(t *testing.T) {
	cases := []struct {
		name   string
		conf   []raft.Server
		alive  []Peer
		target int
		want   []Action
	}{
		{"steady", []raft.Server{srv("a", true), srv("b", true), srv("c", true), srv("d", false)},
			peers("a", "b", "c", "d"), 3, nil},
		{"new members fill voters then non-voters", []raft.Server{srv("a", true)},
			peers("a", "c", "b", "d"), 3,
			[]Action{{AddVoter, peer("b")}, {AddVoter, peer("c")}, {AddNonvoter, peer("d")}}},
		{"dead voter: promote a non-voter first, then demote", []raft.Server{srv("a", true), srv("b", true), srv("c", true), srv("d", false)},
			peers("a", "b", "d"), 3,
			[]Action{{AddVoter, peer("d")}, {Demote, Peer{Name: "c", RaftAddr: "c:7000"}}}},
		{"existing non-voters are promoted before new members", []raft.Server{srv("a", true), srv("b", true), srv("c", true), srv("e", false)},
			peers("a", "b", "d", "e"), 3,
			[]Action{{AddVoter, peer("e")}, {AddNonvoter, peer("d")}, {Demote, Peer{Name: "c", RaftAddr: "c:7000"}}}},
		{"no replacement available still demotes", []raft.Server{srv("a", true), srv("b", true), srv("c", true)},
			peers("a", "b"), 1, []Action{{Demote, Peer{Name: "c", RaftAddr: "c:7000"}}}},
		{"self counts as alive", []raft.Server{srv("a", true), srv("b", true), srv("c", true)},
			peers("b", "c"), 3, nil},
		{"dead non-voter is left alone", []raft.Server{srv("a", true), srv("b", true), srv("c", true), srv("d", false)},
			peers("a", "b", "c"), 3, nil},
		{"moved voter is re-added at its new address", []raft.Server{srv("a", true), srv("b", true), srv("c", true)},
			[]Peer{peer("a"), peer("b"), {Name: "c", RaftAddr: "c:7001"}}, 3,
			[]Action{{AddVoter, Peer{Name: "c", RaftAddr: "c:7001"}}}},
	}
	for _, c := range cases {
		got := PlanReconcile(raft.Configuration{Servers: c.conf}, c.alive, "a", c.target)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
	}
}

func TestRegistryUpdates(t *testing.T) {
	conf := raft.Configuration{Servers: []raft.Server{srv("a", true), srv("b", false), srv("c", false)}}
	members := map[string]MemberInfo{
		"a": {RaftAddr: "a:7000", HTTPAddr: "a:8080", Voter: true, JoinedAt: t0}, // current
		"c": {RaftAddr: "c:7000", HTTPAddr: "c:8080", Voter: true, JoinedAt: t0}, // demoted while dead
	}
	got := RegistryUpdates(conf, peers("a", "b"), members)
	want := []RegisterMember{
		{Name: "b", Info: MemberInfo{RaftAddr: "b:7000", HTTPAddr: "b:8080"}},
		{Name: "c", Info: MemberInfo{RaftAddr: "c:7000", HTTPAddr: "c:8080", JoinedAt: t0}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}

func TestConfigValidate(t *testing.T) {
	ok := Config{NodeName: "n", DataDir: "/tmp/x", RaftBindAddr: "127.0.0.1:0"}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	d := ok.WithDefaults()
	if d.Profile != ProfileLAN || d.Voters != 3 || d.LeaseTimeout != 5*time.Second || d.Now == nil || d.Logger == nil {
		t.Fatalf("defaults %+v", d)
	}
	if (Config{Profile: ProfileTest}).WithDefaults().LeaseTimeout != 750*time.Millisecond {
		t.Fatal("test profile lease timeout")
	}
	bad := []func(*Config){
		func(c *Config) { c.NodeName = "" },
		func(c *Config) { c.DataDir = "" },
		func(c *Config) { c.RaftBindAddr = "" },
		func(c *Config) { c.Profile = "wan" },
		func(c *Config) { c.BootstrapExpect = -1 },
		func(c *Config) { c.Voters = -1 },
		func(c *Config) { c.LeaseTimeout = 500 * time.Millisecond }, // below the 1 s lan heartbeat timeout
	}
	for i, mut := range bad {
		c := ok
		mut(&c)
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("case %d: %v", i, err)
		}
	}
}
