# Sourced by the scripts and the Makefile's build: one CGO_CFLAGS value and one set of build tags for every build,
# so `make build`, `make demo` and `make test` share Go's build cache (a different value is a different cache key).
# go-nvml's header marks dozens of NVML calls deprecated; gcc's warnings about them bury the real output.
case " ${CGO_CFLAGS:-} " in
*" -Wno-deprecated-declarations "*) ;;
*) CGO_CFLAGS="${CGO_CFLAGS:--O2 -g} -Wno-deprecated-declarations" ;;
esac
export CGO_CFLAGS
# mattn/go-sqlite3 compiles FTS5 only under this tag; without it (a plain go install) search uses FTS4 (memory/doc.go).
case " ${GOFLAGS:-} " in
*sqlite_fts5*) ;;
*) GOFLAGS="${GOFLAGS:+$GOFLAGS }-tags=sqlite_fts5" ;;
esac
export GOFLAGS
