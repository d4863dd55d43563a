package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/crawlnode/crawlnode/simweb"
)

// TestDockerCompose runs the repository's docker-compose.yml (three nodes and a simweb,
// images built FROM scratch by docker/build.sh) on a private network of its own, kills one
// node with SIGKILL and restarts it, restarts another, and judges the crawl by simweb's
// report, read from the host through simweb's published port.
func TestDockerCompose(t *testing.T) {
	if testing.Short() {
		t.Skip("docker cluster")
	}
	t.Parallel()  // the containers mostly wait on politeness delays, like the cluster checks
	needDocker(t) // with an engine the scenario must run (CI installs the Compose tool in .ci/run)
	image := buildImage(t)
	project := fmt.Sprintf("cne2e%d", rand.IntN(1_000_000))
	var env []string
	setSubnet := func() {
		subnet := fmt.Sprintf("172.29.%d", 10+rand.IntN(240))
		env = append(os.Environ(), "CRAWLNODE_IMAGE="+image, "CRAWLNODE_SUBNET="+subnet, "SIMWEB_HOSTS=100", "SIMWEB_SEED=31",
			"CRAWLNODE_GRACE=30s", "CRAWLNODE_DELAY=20ms", "CRAWLNODE_LOG_LEVEL=warn", "CRAWLNODE_NO_EXTRACT=true", "SIMWEB_CRAWL_DELAY_HOSTS=0")
	}
	setSubnet()
	compose := func(args ...string) (string, error) {
		cmd := exec.Command("docker-compose", append([]string{"-p", project, "-f", "../docker-compose.yml"}, args...)...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := compose("logs", "--tail", "40")
			t.Logf("docker-compose logs:\n%s", tail(out, 8000))
		}
		if out, err := compose("down", "-v", "--remove-orphans"); err != nil {
			t.Logf("docker-compose down: %v\n%s", err, out)
		}
	})
	// The /24 is drawn at random; another network on this engine may hold it already.
	for try := 1; ; try++ {
		out, err := compose("up", "-d")
		if err == nil {
			break
		}
		if try == 5 || !strings.Contains(out, "overlap") {
			t.Fatalf("docker-compose up: %v\n%s", err, out)
		}
		t.Logf("docker-compose up: subnet taken, drawing another: %s", strings.TrimSpace(tail(out, 300)))
		compose("down", "-v", "--remove-orphans")
		setSubnet()
	}
	container := func(svc string) string {
		out, err := compose("ps", "-q", svc)
		if err != nil {
			t.Fatalf("docker-compose ps %s: %v\n%s", svc, err, out)
		}
		return strings.TrimSpace(out)
	}
	port, err := compose("port", "simweb", "8080")
	if err != nil {
		t.Fatalf("docker-compose port: %v\n%s", err, port)
	}
	simAddr := strings.TrimSpace(port)
	report := func() (simweb.Report, error) {
		var rep simweb.Report
		url := fmt.Sprintf("http://%s/_simweb/report?ua=crawlnode/0.1&delay=20ms&per_host=1", simAddr)
		c := http.Client{Timeout: 30 * time.Second}
		resp, err := c.Get(url)
		if err != nil {
			return rep, err
		}
		defer resp.Body.Close()
		return rep, json.NewDecoder(resp.Body).Decode(&rep)
	}
	waitReq := func(k int) {
		deadline := time.Now().Add(3 * time.Minute)
		for {
			rep, err := report()
			if err == nil && rep.Requests >= k {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("fewer than %d requests after 3 minutes (%v)", k, err)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	docker := func(args ...string) {
		if out, err := exec.Command("docker", args...).CombinedOutput(); err != nil {
			t.Fatalf("docker %v: %v\n%s", args, err, out)
		}
	}
	// restart: on-failure would bring a crashed node back unseen, so Docker's own restarts
	// (RestartCount) are checked. docker kill never adds to it (any signal counts as a manual
	// stop) and docker restart resets it to 0. n1 alone may have one legitimate restart: it
	// exits 1 if it starts before simweb has written the seeds file.
	restarts := func(svc string) int {
		out, err := exec.Command("docker", "inspect", "-f", "{{.RestartCount}}", container(svc)).CombinedOutput()
		var n int
		if _, serr := fmt.Sscan(string(out), &n); err != nil || serr != nil {
			t.Fatalf("docker inspect %s: %v %v\n%s", svc, err, serr, out)
		}
		return n
	}
	waitReq(1500)
	n1Restarts := restarts("n1")
	for _, svc := range []string{"n2", "n3"} {
		if n := restarts(svc); n != 0 {
			t.Errorf("%s exited with an error before the kill; Docker restarted it %d times", svc, n)
		}
	}
	docker("kill", "-s", "KILL", container("n2"))
	t.Log("n2 killed (SIGKILL)")
	time.Sleep(3 * time.Second)
	docker("restart", container("n2"))
	t.Log("n2 started again")
	waitReq(4000)
	docker("restart", "-t", "20", container("n3"))
	t.Log("n3 restarted (SIGTERM, then start)")

	// Every node exits 0 once the cluster is done.
	deadline := time.Now().Add(8 * time.Minute)
	for _, svc := range []string{"n1", "n2", "n3"} {
		id := container(svc)
		for {
			out, err := exec.Command("docker", "inspect", "-f", "{{.State.Status}} {{.State.ExitCode}}", id).CombinedOutput()
			st := strings.TrimSpace(string(out))
			if err == nil && strings.HasPrefix(st, "exited") {
				if st != "exited 0" {
					t.Fatalf("%s: %s", svc, st)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s still %q after 8 minutes", svc, st)
			}
			time.Sleep(time.Second)
		}
	}
	for svc, want := range map[string]int{"n1": n1Restarts, "n2": 0, "n3": 0} {
		if n := restarts(svc); n != want {
			t.Errorf("%s exited with an error during the crawl; Docker restarted it %d times", svc, n-want)
		}
	}
	rep, err := report()
	if err != nil {
		t.Fatal(err)
	}
	// A duplicate is a fetch simweb served whose Done the node had not committed: only the
	// fetches in flight when a node went down: at most --concurrency (32) per node, and at
	// most one per host it owned (per_host=1). kill -9 of n2 can repeat all of them (up to
	// 32 measured: fetches served in the last ~100 ms before the kill, fetched again when n2
	// resumed); n3's SIGTERM drains (0 measured), but the bound leaves it the same 32.
	checkClean(t, rep, 64)
}
