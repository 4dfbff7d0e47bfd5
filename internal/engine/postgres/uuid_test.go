package postgres

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/rosterdb/roster/internal/pgtest"
)

// TestUUIDsTravelAsBytes: uuid.UUID values and arrays of them go to the
// server and back unchanged, in both protocol formats, through the binary
// plans registerUUID adds (never the driver.Valuer and sql.Scanner strings);
// a NULL leaves a uuid.UUID as it was, as before, and uuid.NullUUID still
// holds one.
func TestUUIDsTravelAsBytes(t *testing.T) {
	e := openAt(t, pgtest.Fresh(t))
	ctx := context.Background()
	ids := []uuid.UUID{uuid.Nil, uuid.New(), uuid.Max}
	v7, _ := uuid.NewV7()
	ids = append(ids, v7)

	m := pgtype.NewMap()
	registerUUID(m)
	for _, format := range []int16{pgtype.BinaryFormatCode, pgtype.TextFormatCode} {
		if _, ok := m.PlanEncode(pgtype.UUIDOID, format, ids[1]).(uuidEncodePlan); !ok {
			t.Fatalf("format %d: a uuid.UUID is not encoded through its bytes", format)
		}
	}
	if _, ok := m.PlanScan(pgtype.UUIDOID, pgtype.BinaryFormatCode, &ids[1]).(uuidScanPlan); !ok {
		t.Fatal("a binary uuid is not scanned into a uuid.UUID through its bytes")
	}

	t.Run("round trip", func(t *testing.T) {
		text := "{" + ids[0].String() + "," + ids[1].String() + "," + ids[2].String() + "," + ids[3].String() + "}"
		var one uuid.UUID
		var many []uuid.UUID
		var same bool
		err := e.pool.QueryRow(ctx, "SELECT $1::uuid, $2::uuid[], $2::uuid[] = $3::text::uuid[]", ids[1], ids, text).Scan(&one, &many, &same)
		if err != nil {
			t.Fatal(err)
		}
		if one != ids[1] || !same || len(many) != len(ids) {
			t.Fatalf("got %s %v (the server read the array as sent: %v), want %s %v", one, many, same, ids[1], ids)
		}
		for i := range ids {
			if many[i] != ids[i] {
				t.Fatalf("element %d: %s, want %s", i, many[i], ids[i])
			}
		}
	})
	t.Run("NULL", func(t *testing.T) {
		one := ids[1]
		if err := e.pool.QueryRow(ctx, "SELECT NULL::uuid").Scan(&one); err != nil || one != ids[1] {
			t.Fatalf("scanning NULL into a uuid.UUID: %s, %v; want it left as it was (%s), as uuid.UUID's Scan leaves it", one, err, ids[1])
		}
		var null uuid.NullUUID
		if err := e.pool.QueryRow(ctx, "SELECT NULL::uuid").Scan(&null); err != nil || null.Valid {
			t.Fatalf("scanning NULL into a uuid.NullUUID: %+v, %v", null, err)
		}
		if err := e.pool.QueryRow(ctx, "SELECT $1::uuid", ids[1]).Scan(&null); err != nil || !null.Valid || null.UUID != ids[1] {
			t.Fatalf("scanning into a uuid.NullUUID: %+v, %v", null, err)
		}
	})
	t.Run("every pooled connection", func(t *testing.T) {
		c, err := e.pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Release()
		if ty, ok := c.Conn().TypeMap().TypeForOID(pgtype.UUIDOID); !ok || ty.Codec != (uuidCodec{}) {
			t.Fatal("a pooled connection does not use uuidCodec")
		}
	})
}
