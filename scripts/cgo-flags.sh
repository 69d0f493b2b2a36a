# Sourced by the scripts and the Makefile's build: one CGO_CFLAGS value for every build, so `make build`, `make
# demo` and `make test` share Go's build cache (a different value is a different cache key).
# go-nvml's header marks dozens of NVML calls deprecated; gcc's warnings about them bury the real output.
case " ${CGO_CFLAGS:-} " in
*" -Wno-deprecated-declarations "*) ;;
*) CGO_CFLAGS="${CGO_CFLAGS:--O2 -g} -Wno-deprecated-declarations" ;;
esac
export CGO_CFLAGS
