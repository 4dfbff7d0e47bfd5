# roster's build. Everything runs through `go run` at the versions pinned in
# go.mod (see tools.go): a fresh machine needs Go and nothing else.

SQLC        := go run github.com/sqlc-dev/sqlc/cmd/sqlc
STATICCHECK := go run honnef.co/go/tools/cmd/staticcheck
BENCHTIME   ?= 1s

.PHONY: generate verify test bench demo

## generate: compile queries/ and schema/ into db/ with sqlc
generate:
	$(SQLC) generate

## verify: db/ is current, every query prepares (sqlc vet: SQLite's in memory, PostgreSQL's against a
## migrated schema of its own on the server of ROSTER_TEST_POSTGRES, through internal/vetdb), the code
## passes vet, gofmt and staticcheck, and the comparison with River (bench/river, a module of its own)
## builds and vets from its go.mod
verify:
	$(SQLC) diff
	$(SQLC) vet
	go run ./internal/vetdb $(SQLC) vet -f sqlc.postgres-vet.yaml
	go vet ./...
	@out="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(STATICCHECK) ./...
	cd bench/river && go vet ./...

## test: every test, with the race detector. The fault suite runs on its
## own after the rest: its trials load the machine as they mean to, and hold
## roster to timing bounds (a worker's recovery within 1 s of a failover)
## that another package's tests beside them would make a measure of the
## machine instead.
test:
	go test -race -count=1 -timeout 50m $$(go list ./... | grep -v '/internal/faults$$')
	go test -race -count=1 -timeout 20m ./internal/faults

## bench: every benchmark
bench:
	go test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./...

## demo: a self-contained run of a fleet on a temporary file
demo:
	go run ./cmd/roster demo
