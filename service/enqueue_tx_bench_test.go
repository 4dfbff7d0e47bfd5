package service

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
)

// BenchmarkCreateExecutionsTx: a batch of 1 and of 1,000 created in the
// application's own transaction (begin, create, commit, as an application
// does) against CreateExecutions (one transaction of the Store's), on a
// SQLite file and on PostgreSQL (pgx.Tx); ns/op is per batch.
func BenchmarkCreateExecutionsTx(b *testing.B) {
	ctx := context.Background()
	for _, be := range backends() {
		if !be.shared || be.migrated {
			continue // sqlite-file and postgres
		}
		for _, size := range []int{1, 1000} {
			items := make([]CreateExecutionArgs, size)
			for i := range items {
				items[i] = CreateExecutionArgs{Namespace: "bench", Lane: "l", Payload: []byte("payload")}
			}
			b.Run(fmt.Sprintf("%s/batch=%d/CreateExecutions", be.name, size), func(b *testing.B) {
				s, _ := be.newStore(b)
				b.ResetTimer()
				for range b.N {
					if _, err := s.CreateExecutions(ctx, items); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(fmt.Sprintf("%s/batch=%d/CreateExecutionsTx", be.name, size), func(b *testing.B) {
				loc := be.fresh(b)
				s, _ := be.open(b, loc)
				begin := benchBegin(b, be, loc)
				b.ResetTimer()
				for range b.N {
					tx, commit := begin()
					if _, err := s.CreateExecutionsTx(ctx, tx, items); err != nil {
						b.Fatal(err)
					}
					if err := commit(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// benchBegin returns how the benchmark begins a transaction of the
// application's on the database at loc, over one connection kept open.
func benchBegin(b *testing.B, be backend, loc string) func() (tx any, commit func() error) {
	ctx := context.Background()
	if be.postgres {
		conn, err := pgx.Connect(ctx, be.direct(b, loc))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = conn.Close(context.Background()) })
		return func() (any, func() error) {
			tx, err := conn.Begin(ctx)
			if err != nil {
				b.Fatal(err)
			}
			return tx, func() error { return tx.Commit(ctx) }
		}
	}
	db, err := sql.Open("sqlite", "file:"+loc+"?_pragma=busy_timeout(5000)&_pragma=synchronous(FULL)&_txlock=immediate")
	if err != nil {
		b.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	b.Cleanup(func() { _ = db.Close() })
	return func() (any, func() error) {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		return tx, tx.Commit
	}
}
