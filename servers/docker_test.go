package servers

import (
	"context"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	dc "github.com/ory/dockertest/v3/docker"

	"github.com/stockbench/stockbench/internal/waitfor"
)

// needDocker returns a docker provider on usable images, or skips — unless
// STOCKBENCH_REQUIRE_DOCKER=1, when a missing engine or image fails.
func needDocker(t *testing.T) *Docker {
	t.Helper()
	d, why := autoDocker("", "")
	if d == nil {
		if os.Getenv("STOCKBENCH_REQUIRE_DOCKER") == "1" {
			t.Fatalf("docker required: %s", why)
		}
		t.Skipf("no docker: %s", why)
	}
	return d
}

// ours lists the containers this process started.
func ours(t *testing.T, d *Docker) []dc.APIContainers {
	t.Helper()
	cs, err := d.pool.Client.ListContainers(dc.ListContainersOptions{All: true,
		Filters: map[string][]string{"label": {LabelPID + "=" + strconv.Itoa(os.Getpid())}}})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// TestDockerProvider starts both containers, checks they answer on
// 127.0.0.1 with a password, and checks Stop removes them.
func TestDockerProvider(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	d := needDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ep, err := d.Start(ctx)
	if err != nil {
		d.Stop()
		t.Fatal(err)
	}
	if err := Ping(ctx, ep, 10*time.Second); err != nil {
		d.Stop()
		t.Fatal(err)
	}
	host, _, _ := net.SplitHostPort(ep.RedisAddr)
	if host != "127.0.0.1" || ep.RedisPassword == "" || RedactDSN(ep.MySQLDSN) == ep.MySQLDSN {
		d.Stop()
		t.Fatalf("endpoints %s / %s: want 127.0.0.1 and passwords", RedactDSN(ep.MySQLDSN), ep.RedisAddr)
	}
	cs := ours(t, d)
	if n := len(cs); n != 2 {
		t.Errorf("%d labelled containers running, want 2", n)
	}
	// On a Linux engine the containers share the host's network namespace
	// (no docker-proxy in the path); the servers still answer on 127.0.0.1.
	if ep.Network != d.Network || d.Network == "" {
		t.Errorf("endpoints say network %q, provider %q", ep.Network, d.Network)
	}
	for _, c := range cs {
		ci, err := d.pool.Client.InspectContainer(c.ID)
		if err != nil {
			t.Fatal(err)
		}
		if host := ci.HostConfig.NetworkMode == "host"; host != (d.Network == NetworkHost) {
			t.Errorf("container %s: network mode %q with provider network %q", c.ID[:12], ci.HostConfig.NetworkMode, d.Network)
		}
	}
	// The stats stream must keep delivering (a client timeout once froze
	// it after 10 s).
	// The property is about time itself (the stream outlives 10 s), so the
	// test waits past it, then waits for a fresh sample: a busy machine may
	// deliver late, a frozen stream never.
	time.Sleep(12 * time.Second)
	waitfor.Until(t, "no fresh CPU sample from the engine's stats after 12 s", func() bool {
		_, _, ok := ep.CPU["mysql"]()
		return ok
	})
	if err := d.Stop(); err != nil {
		t.Fatal(err)
	}
	if n := len(ours(t, d)); n != 0 {
		t.Fatalf("%d containers left after Stop", n)
	}
}

// TestDown removes a leftover labelled container. It removes only this
// process's containers (Down itself removes all, which would hit tests
// running in parallel).
func TestDown(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	d := needDocker(t)
	repo, tag := splitImage(d.RedisImage)
	c, err := d.pool.Client.CreateContainer(dc.CreateContainerOptions{Config: &dc.Config{Image: repo + ":" + tag,
		Labels: map[string]string{Label: "1", LabelPID: strconv.Itoa(os.Getpid())}, Cmd: []string{"redis-server"}}})
	if err != nil {
		t.Fatal(err)
	}
	names, err := downMatching(LabelPID + "=" + strconv.Itoa(os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 {
		t.Fatal("down removed nothing")
	}
	if _, err := d.pool.Client.InspectContainer(c.ID); err == nil {
		t.Fatal("leftover container still there")
	}
}

// TestOfflineRecipeMatchesScript: the recipe version the provider insists
// on is the one the build script writes into the images' label.
func TestOfflineRecipeMatchesScript(t *testing.T) {
	b, err := os.ReadFile("../docker/build-offline-images.sh")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "\nRECIPE="+OfflineRecipe+"\n") {
		t.Fatalf("docker/build-offline-images.sh does not set RECIPE=%s (servers.OfflineRecipe)", OfflineRecipe)
	}
}
