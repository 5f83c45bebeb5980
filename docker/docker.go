// Package docker holds the server configuration files of the docker
// backend, embedded so that a stockbench binary run outside its checkout
// can still mount them, and the scripts that build images without a
// registry (build-offline-images.sh).
package docker

import _ "embed"

// MySQLConf is mounted into the MySQL container's /etc/mysql/conf.d.
//
//go:embed mysql/stockbench.cnf
var MySQLConf []byte

// RedisConf is mounted at /usr/local/etc/redis/redis.conf.
//
//go:embed redis/redis.conf
var RedisConf []byte
