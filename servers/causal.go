package servers

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// Causal-read modes of a MySQL cluster (CausalReads): how a
// connection on one node waits until it has applied what other nodes
// committed before it reads.
const (
	// CausalAuto asks each node what it is and picks the mode that fits.
	CausalAuto = "auto"
	// CausalWsrep is Galera's: SET SESSION wsrep_sync_wait=1.
	CausalWsrep = "wsrep"
	// CausalGroupReplication is MySQL Group Replication's: SET SESSION
	// group_replication_consistency='BEFORE'.
	CausalGroupReplication = "group-replication"
	// CausalNone sets nothing: the cluster reads causally on its own
	// (TiDB), or the pool is on one node.
	CausalNone = "none"
)

// CausalModes lists the accepted CausalReads values.
var CausalModes = []string{CausalAuto, CausalWsrep, CausalGroupReplication, CausalNone}

// CheckCausal checks a CausalReads value; empty means auto.
func CheckCausal(mode string) (string, error) {
	if mode == "" {
		return CausalAuto, nil
	}
	if !slices.Contains(CausalModes, mode) {
		return "", fmt.Errorf("CausalReads %q: want one of %s", mode, strings.Join(CausalModes, ", "))
	}
	return mode, nil
}

// causalSetting is the session variable and value a mode sets on every
// connection (name is empty for none).
func causalSetting(mode string) (name, value string) {
	switch mode {
	case CausalWsrep:
		return "wsrep_sync_wait", "1"
	case CausalGroupReplication:
		return "group_replication_consistency", "'BEFORE'"
	}
	return "", ""
}

// WithCausalReads adds mode's session setting to dsn, so that every
// connection of a pool opened on it reads causally ("none": dsn as is).
func WithCausalReads(dsn, mode string) (string, error) {
	name, value := causalSetting(mode)
	if name == "" {
		return dsn, nil
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", fmt.Errorf("mysql dsn %s: %w", RedactDSN(dsn), err)
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params[name] = value
	return cfg.FormatDSN(), nil
}

// CausalStatement is the SET statement of a mode, or "" for none.
func CausalStatement(mode string) string {
	name, value := causalSetting(mode)
	if name == "" {
		return ""
	}
	return "SET SESSION " + name + "=" + value
}

// ResolveCausalReads is resolveCausal for a caller that opens its own
// pools on a cluster's nodes (stockbench audit).
func ResolveCausalReads(ctx context.Context, nodes []string, mode string) (string, error) {
	return resolveCausal(ctx, nodes, mode)
}

// resolveCausal turns a CausalReads mode into the one the run
// uses on nodes (the DSNs of a cluster's nodes, or of one server). auto asks
// each node of a cluster what it is: a Galera node (@@wsrep_on) → wsrep, an
// ONLINE Group Replication member → group-replication, otherwise none; on
// one node it sets nothing (a node reads its own writes). An explicit
// wsrep or group-replication is checked against every node. The error
// names the node by address, never by its DSN.
func resolveCausal(ctx context.Context, nodes []string, mode string) (string, error) {
	mode, err := CheckCausal(mode)
	if err != nil {
		return "", err
	}
	if mode == CausalNone || mode == CausalAuto && len(nodes) < 2 {
		return CausalNone, nil
	}
	kinds := make([]string, len(nodes))
	for i, dsn := range nodes {
		k, why, err := nodeKind(ctx, dsn)
		if err != nil {
			return "", fmt.Errorf("CausalReads %s: mysql node %d (%s): %s", mode, i+1, nodeAddr(dsn), redactDSNErr(err, dsn))
		}
		if mode != CausalAuto && k != mode {
			return "", fmt.Errorf("CausalReads %s: mysql node %d (%s) %s", mode, i+1, nodeAddr(dsn), why)
		}
		kinds[i] = k
	}
	for i := range kinds {
		if kinds[i] != kinds[0] {
			return "", fmt.Errorf("CausalReads auto: mysql node 1 (%s) calls for %s, node %d (%s) for %s: name the mode", nodeAddr(nodes[0]), kinds[0], i+1, nodeAddr(nodes[i]), kinds[i])
		}
	}
	return kinds[0], nil
}

// nodeKind says which causal-read mode one node calls for; why says, for an
// explicit mode that does not fit, what the node is instead.
func nodeKind(ctx context.Context, dsn string) (kind, why string, err error) {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return "", "", err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	var wsrep sql.NullString
	err = db.QueryRowContext(ctx, "SELECT @@wsrep_on").Scan(&wsrep)
	switch {
	case err == nil && (wsrep.String == "1" || strings.EqualFold(wsrep.String, "ON")):
		return CausalWsrep, "is a Galera node", nil
	case err != nil && !mysqlErrIs(err, 1193): // unknown system variable: not MariaDB/Galera
		return "", "", err
	}
	var state string
	err = db.QueryRowContext(ctx, "SELECT MEMBER_STATE FROM performance_schema.replication_group_members WHERE MEMBER_ID = @@server_uuid").Scan(&state)
	switch {
	case err == nil && state == "ONLINE":
		return CausalGroupReplication, "is an ONLINE Group Replication member", nil
	case err == nil:
		return "", "", fmt.Errorf("a Group Replication member in state %s, not ONLINE", state)
	case errors.Is(err, sql.ErrNoRows) || mysqlErrIs(err, 1146, 1193, 1109): // no member row, no such table or variable
		return CausalNone, "is neither a Galera node (@@wsrep_on is not ON) nor an ONLINE Group Replication member", nil
	}
	return "", "", err
}

func mysqlErrIs(err error, numbers ...uint16) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && slices.Contains(numbers, me.Number)
}

// nodeAddr is a node's host:port (or socket), which carries no secret.
func nodeAddr(dsn string) string {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "(unparsable dsn)"
	}
	return cfg.Addr
}

// redactDSNErr is err's text with dsn's password cut out.
func redactDSNErr(err error, dsn string) string {
	return redactErr(err, Endpoints{MySQLDSN: dsn})
}

// describeCausal is the header's words for a mode and how it was chosen.
func describeCausal(mode string, auto bool) string {
	s := mode
	if st := CausalStatement(mode); st != "" {
		s += " (" + strings.TrimPrefix(st, "SET SESSION ") + ")"
	}
	if auto {
		s += ", chosen by auto"
	}
	return s
}

// MySQLDescription describes a run's MySQL in one line without any
// password: one server, or a cluster's nodes, spread and causal reads.
func (e Endpoints) MySQLDescription() string {
	if len(e.MySQLCluster) < 2 {
		return "mysql " + e.Redacted()
	}
	addrs := make([]string, len(e.MySQLCluster))
	for i, d := range e.MySQLCluster {
		addrs[i] = nodeAddr(d)
	}
	pool := "on every node in turn"
	if !e.MySQLSpread {
		pool = "on node 1 only"
	}
	return fmt.Sprintf("mysql cluster of %d nodes (%s), pool %s, causal reads %s", len(addrs), strings.Join(addrs, ", "), pool, describeCausal(e.MySQLCausalReads, e.MySQLCausalAuto))
}
