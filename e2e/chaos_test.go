package e2e

// The chaos suite: a four-node cluster in Docker (the repository's docker-compose.yml,
// images built FROM scratch) crawls a simweb of over 20,000 must-reach pages while one
// fault is injected per scenario. simweb's report judges each run; the figures go to the
// test log as a table (and to $CHAOS_REPORT as Markdown when set: RELIABILITY.md is made
// from it).
//
// Faults: docker kill (SIGKILL), docker network disconnect/connect, iptables DROP rules
// in the DOCKER-USER chain between the two halves of the cluster (the bridge passes
// container traffic through iptables), docker start, and extra nodes started with
// docker run on the compose network. Everything stays on the private network and
// loopback.

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/simweb"
)

var buildImageOnce struct {
	sync.Once
	out string
	err error
}

// buildImage builds the crawlnode:e2e image once per test binary.
func buildImage(t testing.TB) string {
	t.Helper()
	const image = "crawlnode:e2e"
	buildImageOnce.Do(func() {
		build := exec.Command("../docker/build.sh")
		build.Env = append(os.Environ(), "CRAWLNODE_IMAGE="+image)
		out, err := build.CombinedOutput()
		buildImageOnce.out, buildImageOnce.err = string(out), err
	})
	if buildImageOnce.err != nil {
		t.Fatalf("docker/build.sh: %v\n%s", buildImageOnce.err, buildImageOnce.out)
	}
	return image
}

// needDocker skips without a Docker engine and fails when the engine is there but the
// Compose tool is not (.ci/run installs it).
func needDocker(t *testing.T) {
	t.Helper()
	if err := exec.Command("docker", "info").Run(); err != nil {
		t.Skip("no Docker engine here (docker info failed)")
	}
	if _, err := exec.LookPath("docker-compose"); err != nil {
		t.Fatal("a Docker engine is here but docker-compose is not: apt-get install docker-compose")
	}
}

// dockerCluster is one compose project: simweb and n1..n4, plus nodes started later.
type dockerCluster struct {
	t       *testing.T
	image   string
	project string
	subnet  string
	env     []string
	extra   []string // containers started with docker run
	rules   [][]string
	delay   time.Duration
	redo    []redoWindow // what the faults may make the cluster fetch again
	secrets string       // CA, node certificates, cluster key and token.env (docker/secrets.sh's layout)
	token   string       // the API token in secrets/token.env
}

// makeSecrets writes what docker-compose.yml's members need (docker/secrets.sh's files)
// into dir, with the host's crawlnode binary: a CA, certificates for n1..n9, a cluster
// key and the API token.
func makeSecrets(t *testing.T, dir string) string {
	t.Helper()
	names := []string{"n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9"}
	makePKI(t, dir, names...)
	writeClusterKey(t, dir)
	token := fmt.Sprintf("chaos%d", rand.Int64())
	if err := os.WriteFile(filepath.Join(dir, "token.env"), []byte("CRAWLNODE_API_TOKEN="+token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return token
}

func (d *dockerCluster) compose(args ...string) (string, error) {
	cmd := exec.Command("docker-compose", append([]string{"-p", d.project, "-f", "../docker-compose.yml", "--profile", "scale"}, args...)...)
	cmd.Env = d.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// chaosLogLevel is the members' log level: warn, or CRAWLNODE_E2E_LOG_LEVEL (info or debug
// to follow a failure's handoffs, with CRAWLNODE_E2E_LOGDIR to keep them).
func chaosLogLevel() string {
	if l := os.Getenv("CRAWLNODE_E2E_LOG_LEVEL"); l != "" {
		return l
	}
	return "warn"
}

// saveLogs writes, with CRAWLNODE_E2E_LOGDIR set, every member's whole output (the compose
// services' and the containers added later) there, named after the test, to read a
// failure in full: the test's own log keeps only the tails.
func (d *dockerCluster) saveLogs() {
	dir := os.Getenv("CRAWLNODE_E2E_LOGDIR")
	if dir == "" {
		return
	}
	name := strings.ReplaceAll(d.t.Name(), "/", "_")
	out, _ := d.compose("logs", "--no-color", "--timestamps")
	for _, c := range d.extra {
		more, _ := exec.Command("docker", "logs", "--timestamps", c).CombinedOutput()
		out += "\n--- " + c + "\n" + string(more)
	}
	p := filepath.Join(dir, name+".log")
	if err := os.WriteFile(p, []byte(out), 0o644); err != nil {
		d.t.Logf("writing %s: %v", p, err)
		return
	}
	d.t.Logf("whole logs in %s", p)
}

func (d *dockerCluster) docker(args ...string) string {
	d.t.Helper()
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		d.t.Fatalf("docker %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// startDockerCluster brings simweb and n1..n4 up on a fresh /24.
func startDockerCluster(t *testing.T, image string, hosts, seed int, grace time.Duration) *dockerCluster {
	d := &dockerCluster{t: t, image: image, project: fmt.Sprintf("cnchaos%d", rand.IntN(1_000_000)), delay: 20 * time.Millisecond}
	d.secrets = t.TempDir()
	d.token = makeSecrets(t, d.secrets)
	setSubnet := func() {
		d.subnet = fmt.Sprintf("172.30.%d", 10+rand.IntN(240))
		d.env = append(os.Environ(), "CRAWLNODE_IMAGE="+image, "CRAWLNODE_SUBNET="+d.subnet,
			fmt.Sprintf("SIMWEB_HOSTS=%d", hosts), fmt.Sprintf("SIMWEB_SEED=%d", seed),
			"CRAWLNODE_GRACE="+grace.String(), "CRAWLNODE_DELAY="+d.delay.String(), "CRAWLNODE_LOG_LEVEL="+chaosLogLevel(),
			"CRAWLNODE_NO_EXTRACT=true", "SIMWEB_CRAWL_DELAY_HOSTS=0", "CRAWLNODE_SECRETS="+d.secrets)
	}
	setSubnet()
	t.Cleanup(func() {
		for _, r := range d.rules {
			exec.Command("iptables", append([]string{"-D"}, r...)...).Run()
		}
		if t.Failed() {
			out, _ := d.compose("logs", "--tail", "30")
			t.Logf("docker-compose logs:\n%s", tail(out, 6000))
			d.saveLogs()
		}
		for _, c := range d.extra {
			exec.Command("docker", "rm", "-f", "-v", c).Run()
		}
		if out, err := d.compose("down", "-v", "--remove-orphans"); err != nil {
			t.Logf("docker-compose down: %v\n%s", err, out)
		}
	})
	for try := 1; ; try++ {
		out, err := d.compose("up", "-d", "simweb", "n1", "n2", "n3", "n4")
		if err == nil {
			break
		}
		if try == 5 || !strings.Contains(out, "overlap") {
			t.Fatalf("docker-compose up: %v\n%s", err, out)
		}
		d.compose("down", "-v", "--remove-orphans")
		setSubnet()
	}
	return d
}

// container is a service's container id, or an extra node's name.
func (d *dockerCluster) container(svc string) string {
	d.t.Helper()
	if slices.Contains(d.extra, d.project+"_"+svc) {
		return d.project + "_" + svc
	}
	out, err := d.compose("ps", "-q", svc)
	if err != nil {
		d.t.Fatalf("docker-compose ps %s: %v\n%s", svc, err, out)
	}
	return strings.TrimSpace(out)
}

func (d *dockerCluster) network() string { return d.project + "_crawlnet" }

// ip is a node's fixed address: n1 .11, n2 .12 ... (as in docker-compose.yml).
func (d *dockerCluster) ip(svc string) string {
	var k int
	fmt.Sscanf(svc, "n%d", &k)
	return fmt.Sprintf("%s.%d", d.subnet, 10+k)
}

// hostPort is where a container's port 8080 is published on the host.
func (d *dockerCluster) hostPort(svc string) (string, error) {
	out, err := exec.Command("docker", "port", d.container(svc), "8080").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%v: %s", err, out)
	}
	first := strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)[0]
	return first, nil
}

func (d *dockerCluster) simGet(path string, out any) error {
	addr, err := d.hostPort("simweb")
	if err != nil {
		return err
	}
	c := http.Client{Timeout: 60 * time.Second}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(out)
}

func (d *dockerCluster) report() (simweb.Report, error) {
	var rep simweb.Report
	err := d.simGet(fmt.Sprintf("/_simweb/report?ua=crawlnode/0.1&delay=%s&per_host=1", d.delay), &rep)
	return rep, err
}

func (d *dockerCluster) waitRequests(k int, within time.Duration) {
	d.t.Helper()
	deadline := time.Now().Add(within)
	for {
		rep, err := d.report()
		if err == nil && rep.Requests >= k {
			return
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("fewer than %d requests after %s (%v)", k, within, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// view is GET /v1/cluster from the first of svcs that answers.
func (d *dockerCluster) view(svcs ...string) (clusterView, error) {
	var last error
	for _, s := range svcs {
		addr, err := d.hostPort(s)
		if err != nil {
			last = err
			continue
		}
		var v clusterView
		if err := fetchJSON("http://"+addr+"/v1/cluster", &v); err == nil {
			return v, nil
		} else {
			last = err
		}
	}
	return clusterView{}, last
}

// state is "running 0", "exited 0", "exited 137" ...
func (d *dockerCluster) state(svc string) string {
	out, _ := exec.Command("docker", "inspect", "-f", "{{.State.Status}} {{.State.ExitCode}}", d.container(svc)).CombinedOutput()
	return strings.TrimSpace(string(out))
}

// waitDone waits until each of svcs has exited 0 (the cluster finished the crawl).
func (d *dockerCluster) waitDone(within time.Duration, svcs ...string) {
	d.t.Helper()
	deadline := time.Now().Add(within)
	for _, s := range svcs {
		for {
			st := d.state(s)
			if strings.HasPrefix(st, "exited") {
				if st != "exited 0" {
					out, _ := exec.Command("docker", "logs", "--tail", "40", d.container(s)).CombinedOutput()
					d.t.Fatalf("%s: %s\n%s", s, st, tail(string(out), 4000))
				}
				break
			}
			if time.Now().After(deadline) {
				d.t.Fatalf("%s still %q after %s; what it says of its crawl:\n%s", s, st, within, d.crawlStatus(s))
			}
			time.Sleep(time.Second)
		}
	}
}

// crawlStatus is svc's GET /v1/crawl/status (queued URLs, outbox links, slots, extract
// backlog): why a node that should have finished has not.
func (d *dockerCluster) crawlStatus(svc string) string {
	addr, err := d.hostPort(svc)
	if err != nil {
		return err.Error()
	}
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + "/v1/crawl/status")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<10))
	return resp.Status + " " + string(b)
}

// addNode starts a new member with docker run on the compose network.
func (d *dockerCluster) addNode(name string) {
	d.t.Helper()
	cname := d.project + "_" + name
	args := []string{"run", "-d", "--name", cname, "--network", d.network(), "--ip", d.ip(name), "-p", "127.0.0.1::8080",
		"-e", "CRAWLNODE_DATA=/data", "-e", "CRAWLNODE_BIND=0.0.0.0:7946", "-e", "CRAWLNODE_HTTP=0.0.0.0:8080",
		"-e", "CRAWLNODE_RESOLVE=*.sim.test=" + d.subnet + ".10:8080", "-e", "CRAWLNODE_DELAY=" + d.delay.String(),
		"-e", "CRAWLNODE_CONCURRENCY=32", "-e", "CRAWLNODE_EXIT_WHEN_DONE=true", "-e", "CRAWLNODE_ROBOTS_RETRY=200ms",
		"-e", "CRAWLNODE_RETRY_BASE=200ms", "-e", "CRAWLNODE_TIMEOUT=10s", "-e", "CRAWLNODE_MAX_DEPTH=100",
		"-e", "CRAWLNODE_LOG_LEVEL=" + chaosLogLevel(), "-e", "CRAWLNODE_NO_EXTRACT=true",
		"-e", "CRAWLNODE_INTERNAL_HTTP=0.0.0.0:8081", "-v", d.secrets + ":/secrets:ro", "--env-file", filepath.Join(d.secrets, "token.env"),
		"-e", "CRAWLNODE_CLUSTER_KEY_FILE=/secrets/cluster.key", "-e", "CRAWLNODE_TLS_CA=/secrets/crawlnode-ca.pem",
		"-e", "CRAWLNODE_TLS_CERT=/secrets/" + name + "-cert.pem", "-e", "CRAWLNODE_TLS_KEY=/secrets/" + name + "-key.pem"}
	for _, e := range d.env {
		if strings.HasPrefix(e, "CRAWLNODE_GRACE=") {
			args = append(args, "-e", e)
		}
	}
	args = append(args, d.image, "--name", name, "--join", d.subnet+".11:7946")
	d.extra = append(d.extra, cname)
	d.docker(args...)
}

// leave decommissions a node with `crawlnode leave --api` (POST /v1/node/leave): it hands
// its partitions off and exits 0.
func (d *dockerCluster) leave(svc string) error {
	addr, err := d.hostPort(svc)
	if err != nil {
		return err
	}
	if out, err := exec.Command(crawlnodeBin, "leave", "--api", "http://"+addr, "--api-token", d.token).CombinedOutput(); err != nil {
		return fmt.Errorf("crawlnode leave %s: %v: %s", svc, err, out)
	}
	return nil
}

// split drops all traffic between the two groups (both directions) until heal.
func (d *dockerCluster) split(a, b []string) {
	d.t.Helper()
	for _, x := range a {
		for _, y := range b {
			for _, r := range [][]string{
				{"DOCKER-USER", "-s", d.ip(x), "-d", d.ip(y), "-j", "DROP"},
				{"DOCKER-USER", "-s", d.ip(y), "-d", d.ip(x), "-j", "DROP"},
			} {
				if out, err := exec.Command("iptables", append([]string{"-I"}, r...)...).CombinedOutput(); err != nil {
					d.t.Fatalf("iptables -I %v: %v\n%s", r, err, out)
				}
				d.rules = append(d.rules, r)
			}
		}
	}
}

func (d *dockerCluster) heal() {
	for _, r := range d.rules {
		exec.Command("iptables", append([]string{"-D"}, r...)...).Run()
	}
	d.rules = nil
}

// requestLog is simweb's log of every request it served.
func (d *dockerCluster) requestLog() ([]simweb.RequestRecord, error) {
	var log []simweb.RequestRecord
	err := d.simGet("/_simweb/log", &log)
	return log, err
}

// arrivals is the log's arrival times, sorted.
func arrivals(log []simweb.RequestRecord) []time.Time {
	ts := make([]time.Time, len(log))
	for i, r := range log {
		ts[i] = r.Arrival
	}
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	return ts
}

// The duplicate fetches a chaos run may make. The design accepts crawling a URL twice now
// and then (DESIGN.md, "The rules that shape everything", rule 2), and what a fault can make
// the cluster fetch again is what it makes a node forget:
//
//   - A node killed with SIGKILL forgets the leases it had not recorded: at most its fetch
//     slots' and its commit queue's, 32 + max(32, 64) = 96 with the compose file's
//     CRAWLNODE_CONCURRENCY (node/crawl.go, commitQueue). Counted from the server's log as
//     that node's requests open at the kill or answered in the 5 s before (inFlightAt).
//   - A node the others remove (lost for good, cut off past the grace period, on the side
//     of a split without a Raft quorum) has its partitions continued from the copies on
//     their backup nodes (RELIABILITY.md, "Mechanisms"): what it fetched after its last
//     copied round is fetched again. A round starts every --replica-interval (1 s) and
//     takes up to about as long again, so that is the node's requests in the 2 s before
//     the fault; and when it can still reach the web, also those until it fences itself,
//     within the lease time (5 s in the lan profile). Its unrecorded leases (above) too.
//   - On top, 0.5% of the run's requests: an allowance for the odd retry of a request the
//     server answered after the crawler gave up on it, or a lease recorded while its
//     partition moved by handoff. It is not derived from the faults: the final runs in
//     RELIABILITY.md made no duplicate at all in the joins and leaves, where no node is
//     killed or removed, nor in the split.
const (
	chaosUnrecordedMax = 32 + 64
	chaosCopyLag       = 2 * time.Second
	chaosLeaseTime     = 5 * time.Second
	chaosDuplicateRate = 0.005
)

// redoWindow is one node a fault touched at At: killed (its unrecorded leases), and when
// Removed, continued by the others from its partitions' copies, fetching on for Fence.
type redoWindow struct {
	Svc     string
	At      time.Time
	Removed bool
	Fence   time.Duration
}

// mayRedo records that the fault at at touched svcs.
func (d *dockerCluster) mayRedo(at time.Time, removed bool, fence time.Duration, svcs ...string) {
	for _, s := range svcs {
		d.redo = append(d.redo, redoWindow{Svc: s, At: at, Removed: removed, Fence: fence})
	}
}

// duplicateBound is the duplicate fetches the faults in redo allow (see chaosUnrecordedMax),
// counted from the server's log; why lists each node's share.
func duplicateBound(log []simweb.RequestRecord, ip func(svc string) string, redo []redoWindow) (bound int, why []string) {
	for _, w := range redo {
		var mine []simweb.RequestRecord
		for _, r := range log {
			if r.Client == ip(w.Svc) {
				mine = append(mine, r)
			}
		}
		unrecorded := inFlightAt(mine, w.At, chaosUnrecordedMax)
		copied := 0
		if w.Removed {
			for _, r := range mine {
				if !r.Arrival.Before(w.At.Add(-chaosCopyLag)) && r.Arrival.Before(w.At.Add(w.Fence)) {
					copied++
				}
			}
		}
		bound += unrecorded + copied
		why = append(why, fmt.Sprintf("%s: %d unrecorded, %d after its last copy", w.Svc, unrecorded, copied))
	}
	share := int(chaosDuplicateRate * float64(len(log)))
	why = append(why, fmt.Sprintf("%.1f%% of %d requests: %d", 100*chaosDuplicateRate, len(log), share))
	return bound + share, why
}

// chaosResult is one scenario's line of the table.
type chaosResult struct {
	Name                 string
	MustReach            int
	Coverage             float64
	Requests             int
	Duplicates           int
	RobotsViolations     int
	PolitenessViolations int
	LongestStall         time.Duration // longest time without a request to simweb, from the fault to the crawl's last 1%
	Recovery             time.Duration // fault to the fetch rate back at 3/4 of its rate before the fault (after any heal)
	Crawl                time.Duration // first request to last
}

// stallAndRecovery computes, from the server's arrivals, the longest gap after the fault
// began and the time from the fault until a 2-second window's request rate is back at
// 3/4 of the rate of the 10 s before the fault, looking from the fault's end (a heal or a
// restart; the fault itself when nothing ends it) on.
func stallAndRecovery(ts []time.Time, fault, from time.Time) (stall, recovery time.Duration) {
	if len(ts) == 0 {
		return 0, 0
	}
	// The crawl's last 1% of requests are left out: retries waiting out their backoff
	// after everything else is done, not a cluster that stopped.
	end := ts[len(ts)*99/100]
	prev := fault
	for _, t := range ts {
		if t.Before(fault) {
			continue
		}
		if t.After(end) {
			break
		}
		stall = max(stall, t.Sub(prev))
		prev = t
	}
	before := 0
	for _, t := range ts {
		if t.After(fault.Add(-10*time.Second)) && !t.After(fault) {
			before++
		}
	}
	want := float64(before) / 10 * 3 / 4
	for w := from; w.Before(ts[len(ts)-1]); w = w.Add(250 * time.Millisecond) {
		n := 0
		for _, t := range ts {
			if !t.Before(w) && t.Before(w.Add(2*time.Second)) {
				n++
			}
		}
		if float64(n)/2 >= want {
			return stall, w.Add(2 * time.Second).Sub(fault)
		}
	}
	return stall, ts[len(ts)-1].Sub(fault)
}

func (r chaosResult) String() string {
	rate := 100 * float64(r.Duplicates) / float64(max(1, r.Requests))
	return fmt.Sprintf("| %s | %d | %.4f | %d | %d (%.2f%%) | %d | %d | %.1f s | %.1f s | %.0f s |",
		r.Name, r.MustReach, r.Coverage, r.Requests, r.Duplicates, rate, r.RobotsViolations, r.PolitenessViolations,
		r.LongestStall.Seconds(), r.Recovery.Seconds(), r.Crawl.Seconds())
}

const chaosHeader = "| scenario | must-reach | coverage | requests | duplicate fetches | robots violations | politeness violations | longest stall | recovery | crawl |\n|---|---|---|---|---|---|---|---|---|---|"

// TestChaos runs the six scenarios one after another, each on a fresh cluster and web.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos suite")
	}
	needDocker(t)
	if out, err := exec.Command("iptables", "-L", "DOCKER-USER", "-n").CombinedOutput(); err != nil {
		t.Fatalf("the split scenario needs iptables' DOCKER-USER chain: %v\n%s", err, out)
	}
	image := buildImage(t)
	const grace = 10 * time.Second
	const hosts = 180 // over 20,000 must-reach pages (about 115 a host)
	var results []chaosResult
	run := func(name string, seed int, fault func(d *dockerCluster) (faultAt, recoverFrom time.Time, done []string)) {
		t.Run(name, func(t *testing.T) {
			d := startDockerCluster(t, image, hosts, seed, grace)
			d.waitRequests(4000, 3*time.Minute)
			faultAt, from, done := fault(d)
			d.waitDone(6*time.Minute, done...) // the crawls end 26-55 s after the fault; a hang must not take the package's whole timeout
			rep, err := d.report()
			if err != nil {
				t.Fatal(err)
			}
			log, err := d.requestLog()
			if err != nil {
				t.Fatal(err)
			}
			ts := arrivals(log)
			stall, recovery := stallAndRecovery(ts, faultAt, from)
			res := chaosResult{Name: name, MustReach: rep.MustReach, Coverage: rep.Coverage, Requests: rep.Requests,
				Duplicates: rep.DuplicateFetches, RobotsViolations: rep.RobotsViolations + rep.BeforeRobots,
				PolitenessViolations: rep.PolitenessViolations, LongestStall: stall, Recovery: recovery}
			if len(ts) > 0 {
				res.Crawl = ts[len(ts)-1].Sub(ts[0])
			}
			results = append(results, res)
			t.Logf("%s\n%s", chaosHeader, res)
			if rep.MustReach < 20000 {
				t.Errorf("the web has %d must-reach pages; the suite wants at least 20,000", rep.MustReach)
			}
			// Duplicates are the fetches the faults cut off before their outcome was
			// recorded (and copied): duplicateBound says how many each fault allows.
			allowed, why := duplicateBound(log, d.ip, d.redo)
			t.Logf("duplicate fetches %d, allowed %d (%s)", rep.DuplicateFetches, allowed, strings.Join(why, "; "))
			checkClean(t, rep, allowed)
		})
	}

	// 1. kill -9 one node for good.
	run("kill -9 a node for good", 41, func(d *dockerCluster) (time.Time, time.Time, []string) {
		v, err := d.view("n1", "n2")
		if err != nil {
			d.t.Fatal(err)
		}
		victim := "n3"
		if v.Leader == victim {
			victim = "n4"
		}
		at := time.Now()
		d.docker("kill", "-s", "KILL", d.container(victim))
		d.t.Logf("%s killed for good", victim)
		d.mayRedo(at, true, 0, victim)
		rest := slices.DeleteFunc([]string{"n1", "n2", "n3", "n4"}, func(s string) bool { return s == victim })
		return at, at, rest
	})
	// 2. kill -9 the Raft leader; it comes back 5 s later.
	run("kill -9 the Raft leader", 42, func(d *dockerCluster) (time.Time, time.Time, []string) {
		v, err := d.view("n1", "n2", "n3", "n4")
		if err != nil || v.Leader == "" {
			d.t.Fatalf("no leader known: %v", err)
		}
		at := time.Now()
		d.docker("kill", "-s", "KILL", d.container(v.Leader))
		d.t.Logf("leader %s killed", v.Leader)
		d.mayRedo(at, false, 0, v.Leader) // back within the grace period: it keeps its partitions
		time.Sleep(5 * time.Second)
		d.docker("start", d.container(v.Leader))
		return at, at, []string{"n1", "n2", "n3", "n4"}
	})
	// 3. one node cut off the network for longer than the grace period, then back.
	run("cut one node off past the grace period", 43, func(d *dockerCluster) (time.Time, time.Time, []string) {
		at := time.Now()
		d.docker("network", "disconnect", "-f", d.network(), d.container("n2"))
		d.t.Log("n2 cut off")
		// Its network is gone: it reaches the web no more (fence 0), and its partitions go
		// to the others after the grace period.
		d.mayRedo(at, true, 0, "n2")
		time.Sleep(grace + 10*time.Second)
		d.docker("network", "connect", "--ip", d.ip("n2"), d.network(), d.container("n2"))
		d.t.Log("n2 back on the network")
		return at, time.Now(), []string{"n1", "n2", "n3", "n4"}
	})
	// 4. split 2|2, then heal.
	run("split 2|2, then heal", 44, func(d *dockerCluster) (time.Time, time.Time, []string) {
		// Three of the four are Raft voters: the half with two of them keeps a quorum and
		// may remove the other half, which still reaches the web until it fences itself.
		a, b := []string{"n1", "n2"}, []string{"n3", "n4"}
		v, err := d.view("n1", "n2", "n3", "n4")
		if err != nil || len(v.Voters) == 0 {
			d.t.Fatalf("no voters known: %v", err)
		}
		cutOff := b
		if n := len(slices.DeleteFunc(slices.Clone(v.Voters), func(s string) bool { return !slices.Contains(a, s) })); n < 2 {
			cutOff = a
		}
		at := time.Now()
		d.split(a, b)
		d.t.Logf("split n1 n2 | n3 n4 (voters %v)", v.Voters)
		d.mayRedo(at, true, chaosLeaseTime, cutOff...)
		time.Sleep(grace + 10*time.Second)
		d.heal()
		d.t.Log("healed")
		return at, time.Now(), []string{"n1", "n2", "n3", "n4"}
	})
	// 5. power loss: every node killed at once, then all started again.
	run("restart every node at once", 45, func(d *dockerCluster) (time.Time, time.Time, []string) {
		all := []string{"n1", "n2", "n3", "n4"}
		at := time.Now()
		var ids []string
		for _, s := range all {
			ids = append(ids, d.container(s))
		}
		d.docker(append([]string{"kill", "-s", "KILL"}, ids...)...)
		d.t.Log("all nodes killed")
		d.mayRedo(at, false, 0, all...)
		time.Sleep(3 * time.Second)
		d.docker(append([]string{"start"}, ids...)...)
		d.t.Log("all nodes started")
		return at, time.Now(), all
	})
	// 6. nodes join and leave for the whole crawl.
	run("add and remove nodes continuously", 46, func(d *dockerCluster) (time.Time, time.Time, []string) {
		at := time.Now()
		members := []string{"n4"} // the removable ones (n1..n3 stay)
		next := 5
		var left []string
		for i := 0; ; i++ {
			rep, err := d.report()
			if err == nil && rep.Coverage >= 0.97 {
				break
			}
			if i%2 == 0 || len(members) == 0 {
				name := fmt.Sprintf("n%d", next)
				next++
				d.addNode(name)
				members = append(members, name)
				d.t.Logf("%s added", name)
			} else {
				name := members[0]
				if err := d.leave(name); err != nil {
					d.t.Logf("leave %s: %v", name, err)
				} else {
					members = members[1:]
					left = append(left, name)
					d.t.Logf("%s leaving", name)
				}
			}
			time.Sleep(8 * time.Second)
		}
		return at, at, append(append([]string{"n1", "n2", "n3"}, members...), left...)
	})

	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", chaosHeader)
	for _, r := range results {
		fmt.Fprintf(&b, "%s\n", r)
	}
	t.Logf("chaos suite:\n%s", b.String())
	if path := os.Getenv("CHAOS_REPORT"); path != "" {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Error(err)
		}
	}
}
