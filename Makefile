# The few targets people type. See README.md.
.PHONY: demo test engine build vet fuzz bench

demo:            ## install the engine and run the demo agent (or VISOR_MODEL=your.gguf)
	scripts/demo.sh

test:            ## install the engine and run every test, real-engine tests included
	scripts/test.sh

engine:          ## install Debian's llama-server into ~/.cache/visor/engine
	scripts/install-engine.sh

build:           ## build bin/visor with FTS5 search (a plain `go install ./cmd/visor` works too, with FTS4)
	@. scripts/cgo-flags.sh && go build -o bin/visor ./cmd/visor

vet:
	gofmt -l . | (! grep .) && go vet ./...

bench:           ## benchmarks against the real engine
	. scripts/cgo-flags.sh && VISOR_LLAMA_SERVER=$${VISOR_LLAMA_SERVER:-$$HOME/.cache/visor/engine/bin/llama-server} go test -run '^$$' -bench . -benchtime 3x ./...
