package servers

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// Isolation levels a run may ask of its MySQL strategies' transactions
// (--isolation); the empty level is the server's own default.
const (
	IsolationServer         = ""
	IsolationReadCommitted  = "rc"
	IsolationRepeatableRead = "rr"
)

// isolationName is the level as the server spells it.
var isolationName = map[string]string{IsolationReadCommitted: "READ-COMMITTED", IsolationRepeatableRead: "REPEATABLE-READ"}

// ParseIsolation checks a --isolation value.
func ParseIsolation(s string) (string, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if _, ok := isolationName[s]; ok || s == IsolationServer {
		return s, nil
	}
	return "", fmt.Errorf("isolation %q: want rc (READ COMMITTED), rr (REPEATABLE READ) or empty (the server's default)", s)
}

// isolationVar is the session variable that holds the default level on the
// server answering db: tx_isolation on MariaDB before 11.1,
// transaction_isolation on MySQL 8 and later MariaDB.
func isolationVar(ctx context.Context, db *sql.DB) (string, error) {
	var name string
	err := db.QueryRowContext(ctx, "SELECT variable_name FROM information_schema.session_variables WHERE variable_name IN ('TRANSACTION_ISOLATION','TX_ISOLATION') ORDER BY variable_name = 'TRANSACTION_ISOLATION' DESC LIMIT 1").Scan(&name)
	if err != nil {
		return "", fmt.Errorf("isolation: the server's variable: %w", err)
	}
	return strings.ToLower(name), nil
}

// ServerIsolation is the server's default isolation level for new
// sessions (e.g. REPEATABLE-READ), as it reports it.
func ServerIsolation(ctx context.Context, db *sql.DB) (string, error) {
	name, err := isolationVar(ctx, db)
	if err != nil {
		return "", err
	}
	var level string
	if err := db.QueryRowContext(ctx, "SELECT @@global."+name).Scan(&level); err != nil {
		return "", fmt.Errorf("isolation: %w", err)
	}
	return level, nil
}

// WithIsolation is ep with every new MySQL session set to level (rc or
// rr) through the DSN, so that every transaction a strategy begins without
// a level of its own runs at it; a strategy that asks for a level per
// transaction keeps its own. db is any connection to the same server (to
// learn how it names the variable). A spread cluster connector takes no
// DSN: refused.
func WithIsolation(ctx context.Context, ep Endpoints, db *sql.DB, level string) (Endpoints, error) {
	if level == IsolationServer {
		return ep, nil
	}
	if len(ep.MySQLCluster) > 1 && ep.MySQLSpread {
		return ep, fmt.Errorf("isolation %s: not with --mysql-spread (each node's sessions take the server's default)", level)
	}
	name, err := isolationVar(ctx, db)
	if err != nil {
		return ep, err
	}
	cfg, err := mysql.ParseDSN(ep.MySQLDSN)
	if err != nil {
		return ep, fmt.Errorf("isolation: dsn %s: %w", ep.Redacted(), err)
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params[name] = "'" + isolationName[level] + "'"
	ep.MySQLDSN = cfg.FormatDSN()
	return ep, nil
}
