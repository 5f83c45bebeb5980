package inventory_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stockbench/stockbench/inventory"
)

// TestResetSparesForeignTables: a table named like ours but without the
// owner mark stops the reset before anything is dropped; our own tables
// are replaced.
func TestResetSparesForeignTables(t *testing.T) {
	ctx := context.Background()
	db := env.DB
	if err := inventory.ResetMySQL(ctx, db); err != nil {
		t.Fatal(err)
	}
	if err := inventory.LoadStock(ctx, db, []inventory.Stock{{SKU: "x", Total: 1, Available: 1}}); err != nil {
		t.Fatal(err)
	}
	// Our own tables carry the mark, so a second reset replaces them.
	if err := inventory.ResetMySQL(ctx, db); err != nil {
		t.Fatalf("reset of our own tables: %v", err)
	}
	cases := []struct {
		name  string
		table string
	}{
		{"foreign orders", "orders"},
		{"foreign inventory", "inventory"},
		{"foreign outbox", "outbox"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := inventory.ResetMySQL(ctx, db); err != nil {
				t.Fatal(err)
			}
			mustExec(t, "DROP TABLE "+c.table)
			mustExec(t, "CREATE TABLE "+c.table+" (id INT PRIMARY KEY, note VARCHAR(20))")
			mustExec(t, "INSERT INTO "+c.table+" VALUES (1,'mine'),(2,'also mine')")
			err := inventory.ResetMySQL(ctx, db)
			if !errors.Is(err, inventory.ErrNotOurs) || !strings.Contains(err.Error(), c.table) {
				t.Fatalf("reset over a foreign %s: %v", c.table, err)
			}
			var n int
			if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+c.table).Scan(&n); err != nil || n != 2 {
				t.Fatalf("foreign %s: %d rows (err %v), want 2 untouched", c.table, n, err)
			}
			// Nothing else was dropped either: every other table is still there.
			for _, other := range inventory.Tables {
				if err := inventory.CheckOwned(ctx, db, other); other != c.table && err != nil {
					t.Fatalf("%s: %v", other, err)
				}
				var cnt int
				if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA=DATABASE() AND TABLE_NAME=?", other).Scan(&cnt); err != nil || cnt != 1 {
					t.Fatalf("table %s gone after a refused reset", other)
				}
			}
			mustExec(t, "DROP TABLE "+c.table)
		})
	}
	if err := inventory.ResetMySQL(ctx, db); err != nil {
		t.Fatal(err)
	}
}

func mustExec(t *testing.T, q string) {
	t.Helper()
	if _, err := env.DB.ExecContext(context.Background(), q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}
