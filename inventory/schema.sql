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
  KEY orders_state_expires (state, expires_at)
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
  created_at DATETIME(6) NOT NULL
) ENGINE=InnoDB COMMENT='stockbench';
