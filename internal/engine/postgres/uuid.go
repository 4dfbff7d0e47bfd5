package postgres

import (
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
)

// registerUUID makes pgx send and read github.com/google/uuid's UUID as the
// 16 bytes of PostgreSQL's binary uuid. Left to itself pgx reaches a
// uuid.UUID only through its driver.Valuer and sql.Scanner: a string
// formatted and parsed per value, and an error built and discarded per
// element of an array on the way. The ids and lease ids of every claim and
// settle travel as arrays, and that conversion was a quarter of a busy
// worker's CPU. The uuid type is registered again with a codec that knows
// uuid.UUID, and the uuid[] type with it as its element.
func registerUUID(m *pgtype.Map) {
	t := &pgtype.Type{Name: "uuid", OID: pgtype.UUIDOID, Codec: uuidCodec{}}
	m.RegisterType(t)
	m.RegisterType(&pgtype.Type{Name: "_uuid", OID: pgtype.UUIDArrayOID, Codec: &pgtype.ArrayCodec{ElementType: t}})
}

// uuidCodec is pgx's uuid codec, with plans of its own for uuid.UUID.
type uuidCodec struct{ pgtype.UUIDCodec }

// PlanEncode encodes a uuid.UUID from its bytes; other values as pgx does.
func (c uuidCodec) PlanEncode(m *pgtype.Map, oid uint32, format int16, value any) pgtype.EncodePlan {
	if _, ok := value.(uuid.UUID); ok {
		if next := c.UUIDCodec.PlanEncode(m, oid, format, pgtype.UUID{}); next != nil {
			return uuidEncodePlan{next: next}
		}
	}
	return c.UUIDCodec.PlanEncode(m, oid, format, value)
}

// PlanScan scans into a *uuid.UUID directly; other targets as pgx does.
func (c uuidCodec) PlanScan(m *pgtype.Map, oid uint32, format int16, target any) pgtype.ScanPlan {
	if _, ok := target.(*uuid.UUID); ok {
		if next := c.UUIDCodec.PlanScan(m, oid, format, (*uuidTarget)(nil)); next != nil {
			return uuidScanPlan{next: next}
		}
	}
	return c.UUIDCodec.PlanScan(m, oid, format, target)
}

// uuidEncodePlan hands a uuid.UUID on as a pgtype.UUID.
type uuidEncodePlan struct{ next pgtype.EncodePlan }

// Encode encodes value, a uuid.UUID.
func (p uuidEncodePlan) Encode(value any, buf []byte) ([]byte, error) {
	return p.next.Encode(pgtype.UUID{Bytes: value.(uuid.UUID), Valid: true}, buf)
}

// uuidScanPlan hands a *uuid.UUID on as a *uuidTarget.
type uuidScanPlan struct{ next pgtype.ScanPlan }

// Scan scans src into target, a *uuid.UUID.
func (p uuidScanPlan) Scan(src []byte, target any) error {
	return p.next.Scan(src, (*uuidTarget)(target.(*uuid.UUID)))
}

// uuidTarget is a uuid.UUID that pgx's uuid codec scans into directly.
type uuidTarget uuid.UUID

// ScanUUID stores v; a NULL leaves u as it was, as uuid.UUID's own Scan
// does.
func (u *uuidTarget) ScanUUID(v pgtype.UUID) error {
	if v.Valid {
		*u = v.Bytes
	}
	return nil
}
