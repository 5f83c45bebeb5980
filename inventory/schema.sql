-- The shared store layout. MySQL is the system of record for every strategy;
-- the auditor reads these tables directly. COMMENT='stockbench' marks a table
-- as stockbench's own: a reset drops only tables that carry it.
CREATE TABLE inventory (
  sku       VARCHAR(64) NOT NULL PRIMARY KEY,
  total     BIGINT      NOT NULL,
  available BIGINT      NOT NULL,
  occupied  BIGINT      NOT NULL DEFAULT 0,
  sold      BIGINT      NOT NULL DEFAULT 0,
  version   BIGINT      NOT NULL DEFAULT 0
) ENGINE=InnoDB COMMENT='stockbench';

CREATE TABLE orders (
  order_id   VARCHAR(64) NOT NULL PRIMARY KEY,
  sku        VARCHAR(64) NOT NULL,
  qty        BIGINT      NOT NULL,
  state      VARCHAR(16) NOT NULL,
  created_at DATETIME(6) NOT NULL,
  expires_at DATETIME(6) NULL,
  updated_at DATETIME(6) NOT NULL,
  -- The buyer of a reservation made on someone's behalf (NULL: none),
  -- for the per-buyer limit and the auditor's over-limit check.
  buyer      VARCHAR(64) NULL,
  KEY orders_state_expires (state, expires_at)
) ENGINE=InnoDB COMMENT='stockbench';

-- Per-buyer holds of the MySQL strategies: the units a buyer holds of a
-- SKU (its orders reserved or confirmed), raised in the reserve's own
-- transaction only while held + qty stays within the limit, lowered by a
-- cancel or expiry in the transaction that releases the stock. Only
-- reservations that name a buyer are counted here.
CREATE TABLE buyer_holds (
  sku   VARCHAR(64) NOT NULL,
  buyer VARCHAR(64) NOT NULL,
  held  BIGINT      NOT NULL DEFAULT 0,
  PRIMARY KEY (sku, buyer)
) ENGINE=InnoDB COMMENT='stockbench';

-- Local message table of the outbox strategy: one row per stock event,
-- applied to inventory by the relay exactly once and deleted in the same
-- transaction, so the table holds the relay's backlog only (applied=0 is
-- what a pending event looks like to the auditor and the reconciler).
CREATE TABLE outbox (
  id         BIGINT      NOT NULL AUTO_INCREMENT PRIMARY KEY,
  order_id   VARCHAR(64) NOT NULL,
  sku        VARCHAR(64) NOT NULL,
  qty        BIGINT      NOT NULL,
  kind       VARCHAR(16) NOT NULL,
  created_at DATETIME(6) NOT NULL,
  applied    TINYINT     NOT NULL DEFAULT 0,
  KEY outbox_pending (applied, id)
) ENGINE=InnoDB COMMENT='stockbench';

-- The restock journal: one row per restock, written in the same transaction
-- as the inventory row's total += qty. The auditor's ledger is the initial
-- stock plus the rows whose id the harness issued, so a restock whose reply
-- was lost is resolved exactly, and a repeated id adds nothing.
CREATE TABLE restocks (
  restock_id VARCHAR(64) NOT NULL PRIMARY KEY,
  sku        VARCHAR(64) NOT NULL,
  qty        BIGINT      NOT NULL,
  created_at DATETIME(6) NOT NULL,
  -- A SKU's journal summed from the index alone (the mid-run probe and
  -- the audit), not by a scan of every SKU's restocks.
  KEY restocks_sku (sku, qty)
) ENGINE=InnoDB COMMENT='stockbench';

-- Stock buckets of the buckets strategy: a SKU's available, occupied and
-- sold units spread over N rows, so that N buyers lock different rows. The
-- inventory row keeps the SKU's total, its other counts stay 0 once the
-- strategy's Setup moved them here. The auditor adds these rows to the
-- inventory row (audit/layout.go).
CREATE TABLE stock_buckets (
  sku       VARCHAR(64) NOT NULL,
  bucket    INT         NOT NULL,
  available BIGINT      NOT NULL DEFAULT 0,
  occupied  BIGINT      NOT NULL DEFAULT 0,
  sold      BIGINT      NOT NULL DEFAULT 0,
  PRIMARY KEY (sku, bucket)
) ENGINE=InnoDB COMMENT='stockbench';

-- Unit rows of the skiplocked strategy: one row per unit, available,
-- occupied (by order_id) or sold. The inventory row keeps the SKU's total,
-- the auditor counts these rows by state and adds them to the row.
CREATE TABLE stock_units (
  id       BIGINT      NOT NULL AUTO_INCREMENT PRIMARY KEY,
  sku      VARCHAR(64) NOT NULL,
  state    VARCHAR(16) NOT NULL,
  order_id VARCHAR(64) NULL,
  KEY stock_units_free (sku, state, id),
  KEY stock_units_order (order_id)
) ENGINE=InnoDB COMMENT='stockbench';

-- The stock-change log of the ensure strategy (asynchronous ensure, 异步确保):
-- one row per stock change of a paid order, written in the transaction that
-- decides the order in MySQL — kind confirm (occupied → sold) or refund
-- (sold → available) — unique by (order_id, kind). A worker applies the
-- pending rows to Redis with an idempotent script keyed by order id and marks
-- them synced. A retry job re-applies rows left unsynced, counts attempts and
-- raises an alert after repeated failures. Synced rows are kept (the trail).
CREATE TABLE stock_log (
  id         BIGINT      NOT NULL AUTO_INCREMENT PRIMARY KEY,
  order_id   VARCHAR(64) NOT NULL,
  kind       VARCHAR(16) NOT NULL,
  sku        VARCHAR(64) NOT NULL,
  qty        BIGINT      NOT NULL,
  created_at DATETIME(6) NOT NULL,
  synced     TINYINT     NOT NULL DEFAULT 0,
  synced_at  DATETIME(6) NULL,
  attempts   INT         NOT NULL DEFAULT 0,
  alerted    TINYINT     NOT NULL DEFAULT 0,
  UNIQUE KEY stock_log_order (order_id, kind),
  KEY stock_log_pending (synced, attempts, id),
  KEY stock_log_sku (sku, kind, synced)
) ENGINE=InnoDB COMMENT='stockbench';

-- The Redis fence's members (strategies/internal/redisstock/fence.go): the
-- instances of a strategy whose truth is MySQL plus a local table of their
-- own (outbox-local), one row each, and the fence's own row (instance '').
-- A member's epoch is the rebuild round it has drained its local table for
-- (its decisions are all in MySQL, and it decides nothing until the round
-- ends), and the fence row's epoch is the last round whose rebuild completed.
-- beat is the member's last heartbeat, in the database's clock: a member
-- silent past the fence's lease is presumed dead and counted.
CREATE TABLE redis_fence (
  instance VARCHAR(64) NOT NULL PRIMARY KEY,
  epoch    BIGINT      NOT NULL DEFAULT 0,
  beat     DATETIME(6) NOT NULL
) ENGINE=InnoDB COMMENT='stockbench';

-- Which store has the authority to sell a SKU, for lua-tcc's degradation
-- switch (--degrade mysql): 'mysql' while Redis is unreachable and the
-- SKU sells from MySQL rows, 'rebuilding' while a switch back rebuilds
-- Redis from MySQL, 'redis' once it did. A MySQL-mode reserve reads its
-- row under a shared lock, so the switch back (an update of the row)
-- waits for every one in flight, and none commits after the rebuild read
-- MySQL. No row: Redis.
CREATE TABLE sku_authority (
  sku        VARCHAR(64) NOT NULL PRIMARY KEY,
  mode       VARCHAR(16) NOT NULL,
  epoch      BIGINT      NOT NULL DEFAULT 0,
  changed_at DATETIME(6) NOT NULL
) ENGINE=InnoDB COMMENT='stockbench';
