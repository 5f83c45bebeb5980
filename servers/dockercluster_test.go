package servers

import (
	"context"
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	dc "github.com/ory/dockertest/v3/docker"

	"github.com/stockbench/stockbench/internal/clock"
)

// TestDockerRedisClusterAbort: a docker cluster start that fails midway
// removes every container it started. The start is cancelled before it
// begins (every container is created, then the wait for the first node
// gives up), and once the first containers exist (cancelled while they
// come up, or while the cluster forms).
func TestDockerRedisClusterAbort(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	cases := []struct {
		name string
		// cancelAt is how many of this process's containers must exist
		// before the start is cancelled (0: before it begins).
		cancelAt int
	}{
		{"cancelled before the start", 0},
		{"cancelled once mysql and a redis node exist", 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := needDocker(t)
			d.RedisCluster = 3
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			watched := make(chan struct{})
			if c.cancelAt == 0 {
				cancel()
				close(watched)
			} else {
				go func() {
					defer close(watched)
					for {
						cs, err := d.pool.Client.ListContainers(dc.ListContainersOptions{All: true,
							Filters: map[string][]string{"label": {LabelPID + "=" + strconv.Itoa(os.Getpid())}}})
						if err == nil && len(cs) >= c.cancelAt {
							break
						}
						if !clock.Sleep(ctx, 10*time.Millisecond) {
							return
						}
					}
					cancel()
				}()
			}
			bound, stop := context.WithTimeout(ctx, 4*time.Minute)
			defer stop()
			_, err := d.Start(bound)
			cancel()
			<-watched
			switch {
			case err == nil:
				// The start won the race; it must then stop cleanly.
				t.Log("the start finished before the cancel")
				if err := d.Stop(); err != nil {
					t.Fatal(err)
				}
			case !errors.Is(err, context.Canceled):
				t.Errorf("start: %v, want %v", err, context.Canceled)
			}
			if left := ours(t, d); len(left) != 0 {
				t.Fatalf("%d containers left after a failed start", len(left))
			}
		})
	}
}
