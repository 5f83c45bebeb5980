package servers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestRedisURL: a password-protected redis-server started by the local
// provider, reached through redis:// URLs as a service would (requirepass,
// an ACL user, a database number); bad credentials are one clear error
// that never quotes the password.
func TestRedisURL(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	const pw, aclPW = "s3cret-pw", "acl-pw-77"
	l, err := NewLocal()
	if err != nil {
		t.Fatalf("local backend unavailable: %v", err)
	}
	l.RedisPassword = pw
	ctx := context.Background()
	ep, err := l.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Stop()
	admin := redis.NewClient(&redis.Options{Addr: ep.RedisAddr, Password: pw})
	defer admin.Close()
	if err := admin.Do(ctx, "ACL", "SETUSER", "bench", "on", ">"+aclPW, "~*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	// Without credentials the server refuses.
	noAuth := ep
	noAuth.RedisPassword = ""
	if err := Ping(ctx, noAuth, 5*time.Second); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Fatalf("ping without password: %v", err)
	}
	cases := []struct {
		name    string
		url     string
		wantErr string // empty: reaches the server
		wantDB  int
	}{
		{"requirepass", fmt.Sprintf("redis://:%s@%s", pw, ep.RedisAddr), "", 0},
		{"default user named", fmt.Sprintf("redis://default:%s@%s/0", pw, ep.RedisAddr), "", 0},
		{"acl user and database", fmt.Sprintf("redis://bench:%s@%s/2", aclPW, ep.RedisAddr), "", 2},
		{"wrong password", fmt.Sprintf("redis://bench:%s@%s", pw, ep.RedisAddr), "WRONGPASS", 0},
		{"no password", fmt.Sprintf("redis://%s", ep.RedisAddr), "NOAUTH", 0},
		{"tls to a plain server", fmt.Sprintf("rediss://:%s@%s", pw, ep.RedisAddr), "does not answer", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := New(Options{Backend: "external", MySQLDSN: ep.MySQLDSN, RedisURL: c.url})
			if err != nil {
				t.Fatal(err)
			}
			got, err := p.Start(ctx)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want %q", err, c.wantErr)
				}
				for _, secret := range []string{pw, aclPW} {
					if strings.Contains(err.Error(), secret) {
						t.Fatalf("password in error: %v", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			conns, err := Open(got, 4)
			if err != nil {
				t.Fatal(err)
			}
			defer conns.Close()
			if err := conns.Redis.Set(ctx, "sb:url-test", c.name, 0).Err(); err != nil {
				t.Fatal(err)
			}
			if v, err := admin.Do(ctx, "SELECT", c.wantDB).Result(); err != nil || v != "OK" {
				t.Fatal(err)
			}
			probe := redis.NewClient(&redis.Options{Addr: ep.RedisAddr, Password: pw, DB: c.wantDB})
			defer probe.Close()
			if v, err := probe.Get(ctx, "sb:url-test").Result(); err != nil || v != c.name {
				t.Fatalf("key not in database %d: %q %v", c.wantDB, v, err)
			}
			if r := got.RedisRedacted(); strings.Contains(r, pw) || strings.Contains(r, aclPW) {
				t.Fatalf("redacted url %q holds the password", r)
			}
		})
	}
}

func TestParseRedisURL(t *testing.T) {
	cases := []struct {
		name, url string
		wantErr   string
		tls       bool
	}{
		{"plain", "redis://127.0.0.1:6379/1", "", false},
		{"tls", "rediss://u:p4ss@cache.example:6380", "", true},
		{"http scheme", "http://u:p4ss@127.0.0.1:6379", "scheme", false},
		{"bad port", "redis://u:p4ss@127.0.0.1:port", "redis url", false},
		{"bad database", "redis://u:p4ss@127.0.0.1:6379/x", "database", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o, err := ParseRedisURL(c.url)
			if c.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if (o.TLSConfig != nil) != c.tls {
					t.Fatalf("TLS %v, want %v", o.TLSConfig != nil, c.tls)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("error %v, want %q", err, c.wantErr)
			}
			if strings.Contains(err.Error(), "p4ss") {
				t.Fatalf("password in error: %v", err)
			}
		})
	}
	if got := RedactURL("rediss://bench:p4ss@h:1/2"); got != "rediss://bench:***@h:1/2" {
		t.Fatalf("RedactURL = %q", got)
	}
}
