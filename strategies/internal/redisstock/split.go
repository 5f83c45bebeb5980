package redisstock

import (
	"context"
	"database/sql"
	"time"

	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies/internal/sqlstore"
)

// RestockMySQL is Restock's first half alone, for lua-tcc's degradation
// switch: r's journal row and the units in MySQL, in one transaction.
// applied is false for a repeat of r.ID. The Redis write is the caller's
// (ApplyRestock), or the recovery pass's (CatchUpRestocks) and the
// rebuild's when the caller skips it or it fails: Redis is then short of
// the units, never over.
func (s Store) RestockMySQL(ctx context.Context, db *sql.DB, r inventory.Restock) (version int64, applied bool, err error) {
	err = sqlstore.InTx(ctx, db, func(tx *sql.Tx) (err error) {
		version, applied, err = sqlstore.JournalRestock(ctx, tx, r)
		return err
	})
	return version, applied, err
}

// ApplyRestock is Restock's Redis write of a restock RestockMySQL applied
// as MySQL version, bounded by within.
func (s Store) ApplyRestock(ctx context.Context, r inventory.Restock, version int64, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	_, err := s.applyRestock(ctx, r.SKU, r.Qty, version)
	return err
}
