package gossip

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestMetaRoundTrip(t *testing.T) {
	started := time.Date(2025, 3, 4, 5, 6, 7, 891011, time.UTC)
	cases := []Meta{
		{State: StateJoining},
		{HTTPAddr: "10.0.0.12:8080", RaftAddr: "10.0.0.12:8300", State: StateActive, Version: "v1.2.3", DataFormat: 7, Started: started},
		{HTTPAddr: "[::1]:80", State: StateDraining, DataFormat: 1 << 40, Started: time.Unix(0, 1).UTC()},
		{State: StateLeft, Version: strings.Repeat("x", 300)},
		{State: State("future-state")}, // decodes even though Validate would refuse it
	}
	for _, m := range cases {
		b := m.Encode()
		if len(b) != m.EncodedSize() {
			t.Errorf("%+v: EncodedSize %d, Encode %d bytes", m, m.EncodedSize(), len(b))
		}
		got, err := DecodeMeta(b)
		if err != nil {
			t.Fatalf("%+v: decode: %v", m, err)
		}
		if !got.Equal(m) {
			t.Errorf("round trip: got %+v, want %+v", got, m)
		}
		// A compatible newer writer appends fields: ignored.
		got, err = DecodeMeta(append(b, 0x01, 0x02, 0x03))
		if err != nil || !got.Equal(m) {
			t.Errorf("with trailing bytes: got %+v, %v", got, err)
		}
		// Every strict prefix is an error, never a panic or a wrong value.
		for i := range len(b) {
			if _, err := DecodeMeta(b[:i]); !errors.Is(err, ErrInvalidMeta) {
				t.Errorf("prefix %d of %d: err %v, want ErrInvalidMeta", i, len(b), err)
			}
		}
	}
	if _, err := DecodeMeta([]byte{2, 0, 0, 0, 0, 0, 0}); !errors.Is(err, ErrInvalidMeta) {
		t.Errorf("unknown format: err %v", err)
	}
	typical := Meta{HTTPAddr: "10.0.0.12:8080", RaftAddr: "10.0.0.12:8300", State: StateActive, Version: "v1.2.3", DataFormat: 1, Started: started}
	t.Logf("typical encoded size: %d bytes", typical.EncodedSize())
	if n := typical.EncodedSize(); n > 80 {
		t.Errorf("typical meta is %d bytes, expected a compact encoding", n)
	}
}

// metaOfSize returns a valid Meta whose encoding is exactly n bytes (n >= 20).
func metaOfSize(t *testing.T, n int) Meta {
	t.Helper()
	m := Meta{HTTPAddr: "127.0.0.1:1", State: StateActive, DataFormat: 1, Started: time.Unix(1700000000, 0).UTC()}
	for l := 0; l <= n; l++ {
		m.Version = strings.Repeat("v", l)
		if m.EncodedSize() == n {
			return m
		}
	}
	t.Fatalf("no meta of size %d", n)
	return m
}

func TestMetaValidate(t *testing.T) {
	cases := []struct {
		name string
		m    Meta
		want error
	}{
		{"ok", Meta{HTTPAddr: "127.0.0.1:8080", RaftAddr: "127.0.0.1:8300", State: StateActive}, nil},
		{"empty state", Meta{}, ErrInvalidMeta},
		{"unknown state", Meta{State: "sleeping"}, ErrInvalidMeta},
		{"bad http addr", Meta{State: StateActive, HTTPAddr: "nohostport"}, ErrInvalidMeta},
		{"bad raft addr", Meta{State: StateActive, RaftAddr: "1.2.3.4"}, ErrInvalidMeta},
		{"negative format", Meta{State: StateActive, DataFormat: -1}, ErrInvalidMeta},
		{"exactly 512", metaOfSize(t, MaxMetaSize), nil},
		{"513", metaOfSize(t, MaxMetaSize+1), ErrMetaTooLarge},
	}
	for _, c := range cases {
		err := c.m.Validate()
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	ok := Config{Name: "n1", BindAddr: "127.0.0.1:0", Profile: ProfileTest}
	cases := []struct {
		name string
		mod  func(*Config)
		want error
	}{
		{"ok", func(*Config) {}, nil},
		{"zero except name", func(c *Config) { *c = Config{Name: "x"} }, nil},
		{"no name", func(c *Config) { c.Name = "" }, ErrInvalidConfig},
		{"long name", func(c *Config) { c.Name = strings.Repeat("n", 129) }, ErrInvalidConfig},
		{"hostname bind", func(c *Config) { c.BindAddr = "localhost:0" }, ErrInvalidConfig},
		{"no port", func(c *Config) { c.BindAddr = "127.0.0.1" }, ErrInvalidConfig},
		{"bad port", func(c *Config) { c.BindAddr = "127.0.0.1:70000" }, ErrInvalidConfig},
		{"bad advertise", func(c *Config) { c.AdvertiseAddr = "host:1" }, ErrInvalidConfig},
		{"ipv6 ok", func(c *Config) { c.BindAddr = "[::1]:0" }, nil},
		{"profile", func(c *Config) { c.Profile = "wan" }, ErrInvalidConfig},
		{"neg buffer", func(c *Config) { c.EventBuffer = -1 }, ErrInvalidConfig},
		{"neg window", func(c *Config) { c.CoalesceWindow = -time.Second }, ErrInvalidConfig},
		{"backoff order", func(c *Config) { c.JoinBackoffMin, c.JoinBackoffMax = time.Second, time.Millisecond }, ErrInvalidConfig},
		{"bad meta state", func(c *Config) { c.Meta.State = "x" }, ErrInvalidMeta},
		{"meta too large", func(c *Config) { c.Meta = metaOfSize(t, 513) }, ErrMetaTooLarge},
	}
	for _, c := range cases {
		cfg := ok
		c.mod(&cfg)
		err := cfg.Validate()
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
		if c.want != nil && !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v does not wrap ErrInvalidConfig", c.name, err)
		}
	}
}

func TestDefaultsPerProfile(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	lan := Config{Name: "a", Now: func() time.Time { return now }}.withDefaults()
	if lan.Profile != ProfileLAN || lan.BindAddr != DefaultBindAddr || lan.EventBuffer != 256 ||
		lan.CoalesceWindow != 100*time.Millisecond || lan.Meta.State != StateJoining || !lan.Meta.Started.Equal(now) {
		t.Errorf("lan defaults: %+v", lan)
	}
	if mc := lan.mlConfig(); mc.ProbeInterval != time.Second || mc.BindPort != 7946 || mc.BindAddr != "0.0.0.0" {
		t.Errorf("lan memberlist config: probe %v bind %s:%d", mc.ProbeInterval, mc.BindAddr, mc.BindPort)
	}
	tc := Config{Name: "a", Profile: ProfileTest, BindAddr: "127.0.0.1:0", AdvertiseAddr: "127.0.0.2:7000"}.withDefaults()
	mc := tc.mlConfig()
	if mc.ProbeInterval != 50*time.Millisecond || mc.GossipInterval != 20*time.Millisecond || mc.ProbeTimeout >= mc.ProbeInterval ||
		mc.AdvertiseAddr != "127.0.0.2" || mc.AdvertisePort != 7000 || mc.BindPort != 0 || tc.CoalesceWindow != 10*time.Millisecond {
		t.Errorf("test memberlist config: %+v", mc)
	}
}

func member(name string, st Status, version string) Member {
	return Member{Name: name, Addr: "127.0.0.1:1", Status: st, Meta: Meta{State: StateActive, Version: version}}
}

func TestCoalescer(t *testing.T) {
	type step struct {
		name    string
		st      Status
		version string
	}
	type ev struct {
		kind    EventKind
		name    string
		version string
	}
	cases := []struct {
		name      string
		delivered map[string]Status
		steps     []step
		want      []ev
	}{
		{"join", nil, []step{{"a", StatusAlive, "1"}}, []ev{{EventJoin, "a", "1"}}},
		{"join then updates: one join, latest meta", nil,
			[]step{{"a", StatusAlive, "1"}, {"a", StatusAlive, "2"}, {"a", StatusAlive, "3"}}, []ev{{EventJoin, "a", "3"}}},
		{"updates of known member", map[string]Status{"a": StatusAlive},
			[]step{{"a", StatusAlive, "2"}, {"a", StatusAlive, "3"}}, []ev{{EventUpdate, "a", "3"}}},
		{"fail", map[string]Status{"a": StatusAlive}, []step{{"a", StatusDead, "1"}}, []ev{{EventFail, "a", "1"}}},
		{"leave", map[string]Status{"a": StatusAlive}, []step{{"a", StatusLeft, "1"}}, []ev{{EventLeave, "a", "1"}}},
		{"restart within batch is update", map[string]Status{"a": StatusAlive},
			[]step{{"a", StatusDead, "1"}, {"a", StatusAlive, "2"}}, []ev{{EventUpdate, "a", "2"}}},
		{"rejoin after delivered fail", map[string]Status{"a": StatusDead},
			[]step{{"a", StatusAlive, "2"}}, []ev{{EventJoin, "a", "2"}}},
		{"join+fail of unknown is nothing", nil, []step{{"a", StatusAlive, "1"}, {"a", StatusDead, "1"}}, nil},
		{"dead again is nothing", map[string]Status{"a": StatusDead},
			[]step{{"a", StatusAlive, "1"}, {"a", StatusDead, "1"}}, nil},
		{"dead then left is leave", map[string]Status{"a": StatusDead}, []step{{"a", StatusLeft, "1"}}, []ev{{EventLeave, "a", "1"}}},
		{"several members sorted", map[string]Status{"b": StatusAlive},
			[]step{{"c", StatusAlive, "1"}, {"b", StatusDead, "1"}, {"a", StatusAlive, "1"}, {"c", StatusAlive, "2"}},
			[]ev{{EventJoin, "a", "1"}, {EventFail, "b", "1"}, {EventJoin, "c", "2"}}},
	}
	for _, c := range cases {
		co := newCoalescer()
		for n, s := range c.delivered {
			co.delivered[n] = s
		}
		for i, s := range c.steps {
			co.add(rawEvent{seq: uint64(i + 1), member: member(s.name, s.st, s.version)})
		}
		got := co.batch()
		if len(got) != len(c.want) {
			t.Errorf("%s: got %d events %+v, want %+v", c.name, len(got), got, c.want)
			continue
		}
		for i, w := range c.want {
			g := got[i]
			if g.Kind != w.kind || g.Member.Name != w.name || g.Member.Meta.Version != w.version {
				t.Errorf("%s: event %d = %s %s v%s, want %s %s v%s", c.name, i, g.Kind, g.Member.Name, g.Member.Meta.Version, w.kind, w.name, w.version)
			}
		}
		co.commit()
		if co.len() != 0 || len(co.batch()) != 0 {
			t.Errorf("%s: pending after commit", c.name)
		}
	}
}

func TestCoalescerIgnoresOlderSeq(t *testing.T) {
	co := newCoalescer()
	// Overflow slot (seq 10) drained and delivered before an older channel event (seq 5).
	co.add(rawEvent{seq: 10, member: member("a", StatusAlive, "new")})
	co.commit()
	if co.add(rawEvent{seq: 5, member: member("a", StatusAlive, "old")}) {
		t.Fatal("older event accepted after a newer one was delivered")
	}
	if co.len() != 0 {
		t.Fatal("stale event pending")
	}
	co.add(rawEvent{seq: 12, member: member("a", StatusAlive, "newer")})
	co.add(rawEvent{seq: 11, member: member("a", StatusDead, "older")})
	b := co.batch()
	if len(b) != 1 || b[0].Kind != EventUpdate || b[0].Member.Meta.Version != "newer" {
		t.Fatalf("got %+v", b)
	}
	// forget keeps a member with pending changes, drops one without.
	co.forget("a")
	if co.len() != 1 {
		t.Fatal("forget dropped a pending change")
	}
	co.commit()
	co.forget("a")
	if co.add(rawEvent{seq: 1, member: member("a", StatusAlive, "x")}); co.batch()[0].Kind != EventJoin {
		t.Fatal("forgotten member should rejoin as Join")
	}
}

func TestEventKindString(t *testing.T) {
	for k, s := range map[EventKind]string{EventJoin: "join", EventLeave: "leave", EventFail: "fail", EventUpdate: "update", 0: "unknown"} {
		if k.String() != s {
			t.Errorf("%d: %q", k, k.String())
		}
	}
}
