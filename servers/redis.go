package servers

import (
	"context"

	"github.com/redis/go-redis/v9"
)

func pingRedis(ctx context.Context, addr, password string) error {
	c := redis.NewClient(&redis.Options{Addr: addr, Password: password, MaxRetries: -1})
	defer c.Close()
	return c.Ping(ctx).Err()
}
