#!/usr/bin/env bash
# Installs Debian unstable's llama-server into a folder visor owns, without building anything and without touching
# the system: packages are downloaded with a private apt configuration and unpacked with dpkg -x.
# Debian 12's glibc is too old for sid's binaries, so the server runs through sid's own dynamic loader; the
# wrapper script bin/llama-server hides that. Idempotent: a second run only checks the installed binary.
#
# On a machine with a GPU it adds Debian's Vulkan backend (libggml*-backend-vulkan with libvulkan1, and libegl1 +
# libglvnd0, without which NVIDIA's Vulkan driver does not start and llama-server silently runs on the CPU).
#
# Usage: visor engine install [DIR], or from a checkout scripts/install-engine.sh [DIR] (this file is embedded in
# the binary; the script in scripts/ runs it)     (default: $VISOR_ENGINE_DIR or ${XDG_CACHE_HOME:-~/.cache}/visor/engine)
# Environment:
#   VISOR_DEBIAN_MIRROR   Debian mirror URL carrying sid (default: the Debian mirror of this system's apt sources)
#   VISOR_ENGINE_GPU      auto (default: Vulkan when /dev/dri, /dev/nvidia* or nvidia-smi is present), vulkan,
#                         cuda (Debian's CUDA backend from contrib/non-free, see README), or off
#   VISOR_ENGINE_DEBS     install from the .deb files in this folder instead of downloading (offline machines)
#   VISOR_ENGINE_FORCE    reinstall even if a working engine is there
#   VISOR_ENGINE_EXTRA_PKGS  more packages to unpack into the engine
# apt's own proxy settings (Acquire::http::Proxy in apt.conf) and http_proxy/https_proxy are honoured.
set -euo pipefail

dir=${1:-${VISOR_ENGINE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/visor/engine}}
# A relative folder is made absolute: the wrapper written below names its files by this path, and apt reads a
# relative Dir:: setting under its own folders (an install into `.cache/engine` downloaded nothing and stopped
# without a word after reading the package lists).
case "$dir" in /*) ;; *) dir="$PWD/$dir" ;; esac
pkgs=(llama.cpp-tools libllama0 libggml0 libc6 libstdc++6 libgcc-s1 libgomp1 libssl3t64 zlib1g libzstd1)
# Added after the library names are resolved below, which would drop an extra that looks like one of them (a
# backend such as libggml0-backend-rpc).
extra_pkgs=(${VISOR_ENGINE_EXTRA_PKGS:-})

fail() { echo "install-engine: $*" >&2; exit 1; }
say() { echo "install-engine: $*"; }
# ticking LOG MSG CMD... runs CMD with its output in LOG and says MSG with the time taken every 15 s while it runs:
# reading sid's package lists (tens of MB to fetch and index) took 70 s on a busy two-core machine, in silence.
ticking() {
  local log=$1 msg=$2 start=$SECONDS next=15 pid
  shift 2
  "$@" >"$log" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if (( SECONDS - start >= next )); then
      say "  … $msg ($(( SECONDS - start )) s)"
      next=$(( next + 15 ))
    fi
  done
  wait "$pid"
}
wrapper="$dir/bin/llama-server"

# Which GPU backend to install.
gpu=${VISOR_ENGINE_GPU:-auto}
case "$gpu" in
  auto)
    gpu=off
    if compgen -G "/dev/dri/renderD*" >/dev/null || compgen -G "/dev/nvidia[0-9]*" >/dev/null || command -v nvidia-smi >/dev/null; then
      gpu=vulkan
    fi ;;
  vulkan|cuda|off) ;;
  *) fail "VISOR_ENGINE_GPU=$gpu: use auto, vulkan, cuda or off" ;;
esac

# Two installs at once (two test runs, `visor engine install` beside a script) would unpack into the same folders
# and break each other: the second waits for the first, then finds its engine installed.
mkdir -p "$dir"
if command -v flock >/dev/null; then
  exec 9>"$dir/.install.lock"
  if ! flock -n 9; then
    say "another install into $dir is running: waiting for it (at most 15 minutes)"
    flock -w 900 9 || fail "another install still holds $dir/.install.lock after 15 minutes: stop it, or remove the lock file if none runs"
  fi
fi

has_backend() { compgen -G "$dir/root/usr/lib/*/ggml/backends*/libggml-$1*.so" >/dev/null; }
if [ -x "$wrapper" ] && [ -z "${VISOR_ENGINE_FORCE:-}" ] && "$wrapper" --version >/dev/null 2>&1 &&
  { [ "$gpu" = off ] || has_backend "$gpu"; }; then
  echo "llama-server already installed: $wrapper"
  exit 0
fi

# unpack DEB: dpkg -x, or where dpkg is missing (a container, a non-Debian host) a small ar + tar reader.
unpack() {
  if command -v dpkg >/dev/null; then dpkg -x "$1" "$root.new"; return; fi
  command -v python3 >/dev/null || fail "neither dpkg nor python3 found to unpack $1"
  python3 - "$1" "$root.new" <<'PY'
import io, sys, tarfile
data = open(sys.argv[1], 'rb').read(); pos = 8
while pos < len(data):
    name = data[pos:pos+16].decode().strip().rstrip('/'); size = int(data[pos+48:pos+58])
    if name.startswith('data.tar'):
        tarfile.open(fileobj=io.BytesIO(data[pos+60:pos+60+size])).extractall(sys.argv[2])
    pos += 60 + size + (size & 1)
PY
}

# system_sources prints "URI SUITE" for each enabled deb source of this system, one-line and deb822 formats.
system_sources() {
  local f
  local etc=${VISOR_APT_ETC:-/etc/apt} # another folder only for checking this parser
  for f in "$etc"/sources.list "$etc"/sources.list.d/*.list; do
    [ -r "$f" ] || continue
    awk '$1 == "deb" { i = 2; if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ } if (i < NF) print $i, $(i+1) }' "$f"
  done
  for f in "$etc"/sources.list.d/*.sources; do
    [ -r "$f" ] || continue
    awk 'BEGIN { RS = ""; FS = "\n" }
      { uris = ""; suites = ""; types = ""; enabled = "yes"
        for (i = 1; i <= NF; i++) {
          if ($i ~ /^[ \t]*#/ || index($i, ":") == 0) continue
          key = tolower(substr($i, 1, index($i, ":") - 1)); val = substr($i, index($i, ":") + 1)
          gsub(/^[ \t]+|[ \t]+$/, "", val)
          if (key == "uris") uris = val; else if (key == "suites") suites = val
          else if (key == "types") types = val; else if (key == "enabled") enabled = tolower(val)
        }
        if (types ~ /(^| )deb( |$)/ && enabled != "no") {
          n = split(uris, u, " "); split(suites, s, " ")
          for (j = 1; j <= n; j++) print u[j], s[1]
        }
      }' "$f"
  done
}

# debian_mirror picks the Debian archive among the system's sources: not the security archive (it has no sid),
# not Ubuntu's, not a CD.
debian_mirror() {
  system_sources | awk '$1 !~ /^cdrom:/ && $1 !~ /security/ && $2 !~ /-security$/ && $1 !~ /ubuntu/ { sub(/\/+$/, "", $1); print $1; exit }'
}

components=main
if [ "$gpu" = cuda ]; then
  # Debian builds ggml's CUDA backend in contrib; it needs NVIDIA's CUDA runtime and cuBLAS from non-free.
  components="main contrib non-free"
fi

root="$dir/root"
mkdir -p "$dir/debs"
if [ -n "${VISOR_ENGINE_DEBS:-}" ]; then
  ls "$VISOR_ENGINE_DEBS"/*.deb >/dev/null 2>&1 || fail "VISOR_ENGINE_DEBS=$VISOR_ENGINE_DEBS has no .deb files"
  say "installing from the .deb files in $VISOR_ENGINE_DEBS (no download)"
  rm -f "$dir/debs"/*.deb
  cp "$VISOR_ENGINE_DEBS"/*.deb "$dir/debs/"
else
  command -v apt-get >/dev/null || fail "apt-get not found: this installer needs a Debian or Ubuntu host (or put llama-server on PATH)"
  mirror=${VISOR_DEBIAN_MIRROR:-$(debian_mirror || true)}
  [ -n "$mirror" ] || fail "no Debian mirror found in /etc/apt/sources.list or /etc/apt/sources.list.d/ (Ubuntu's and security archives do not carry sid): set VISOR_DEBIAN_MIRROR to a Debian mirror URL, e.g. VISOR_DEBIAN_MIRROR=http://YOUR-MIRROR/debian ${VISOR_INSTALL_COMMAND:-$0}"
  say "Debian mirror $mirror${VISOR_DEBIAN_MIRROR:+ (from VISOR_DEBIAN_MIRROR)}"
  proxy=$(apt-config dump 2>/dev/null | awk -F'"' 'tolower($1) ~ /^acquire::https?::proxy / { print $2; exit }')
  proxy=${proxy:-${http_proxy:-${HTTP_PROXY:-}}}
  [ -n "$proxy" ] && say "through proxy $proxy"

  mkdir -p "$dir/apt/lists/partial" "$dir/apt/cache/archives/partial"
  echo "deb $mirror sid $components" > "$dir/apt/sources.list"
  # Only the source list is private: apt.conf and apt.conf.d still apply, so the user's proxy and TLS settings do.
  aptopts=(-o Dir::State::Lists="$dir/apt/lists" -o Dir::Etc::SourceList="$dir/apt/sources.list"
    -o Dir::Etc::SourceParts=/dev/null -o Dir::Cache="$dir/apt/cache" -o Dir::State::Status=/var/lib/dpkg/status
    -o APT::Sandbox::User=root -o Debug::NoLocking=1 -o Acquire::Languages=none)
  [ "$(id -u)" = 0 ] || aptopts+=(-o APT::Sandbox::User="$(id -un)")

  say "reading Debian sid package lists ..."
  if ! ticking "$dir/apt/update.log" "still reading the package lists" apt-get "${aptopts[@]}" -qq update; then
    # A run killed mid-update leaves partial lists that make the next update fail; start those lists afresh once.
    rm -rf "$dir/apt/lists" && mkdir -p "$dir/apt/lists/partial"
    ticking "$dir/apt/update.log" "still reading the package lists" apt-get "${aptopts[@]}" -qq update ||
      fail "apt-get update of sid lists from $mirror failed (see $dir/apt/update.log); if that mirror has no sid, set VISOR_DEBIAN_MIRROR"
  fi

  depends() { # the package names a package depends on, one level, alternatives and virtual names dropped
    apt-cache "${aptopts[@]}" depends --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces \
      --no-enhances "$@" 2>/dev/null | awk '$1 == "Depends:" && $2 !~ /^</ { print $2 }' | sort -u
  }
  # sid renames library packages when their ABI changes (libllama0 → libllama1): take the current names of the
  # llama/ggml libraries from llama.cpp-tools' own dependencies, keeping the defaults when none are found.
  resolved=$(apt-cache "${aptopts[@]}" depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
    --no-replaces --no-enhances llama.cpp-tools 2>/dev/null | awk '/^lib(llama|ggml|mtmd)[a-z0-9.-]*$/' | sort -u)
  if [ -n "$resolved" ]; then
    pkgs=(llama.cpp-tools $resolved $(printf '%s\n' "${pkgs[@]}" | grep -Ev '^(llama\.cpp-tools|lib(llama|ggml|mtmd).*)$'))
  fi
  pkgs+=("${extra_pkgs[@]}")
  ggml=$(printf '%s\n' "${pkgs[@]}" | grep -E '^libggml[0-9]+$' | head -n1)
  ggml=${ggml:-libggml0}
  if [ "$gpu" != off ]; then
    backend="$ggml-backend-$gpu"
    apt-cache "${aptopts[@]}" show "$backend" >/dev/null 2>&1 ||
      fail "$backend is not in Debian sid ($components) at $mirror: set VISOR_ENGINE_GPU=off for the CPU engine"
    extra=("$backend")
    if [ "$gpu" = vulkan ]; then
      # libegl1/libglvnd0 are no dependency of the backend, but NVIDIA's Vulkan driver loads glvnd's libEGL.
      extra+=(libvulkan1 libegl1 libglvnd0)
    else
      # libcuda.so.1 comes with the host's NVIDIA driver; the CUDA runtime and cuBLAS come from non-free.
      extra+=($(depends "$backend" | grep -E '^libcu(blas|blaslt|dart)' || true))
      extra+=($(depends $(depends "$backend" | grep -E '^libcublas[0-9]') | grep -E '^libcublaslt' || true))
    fi
    # The backend's own library dependencies, one level (Mesa's EGL, which libegl1 pulls, is left out: NVIDIA
    # brings its own, and Mesa's needs LLVM).
    for d in $(depends "$backend"); do
      case "$d" in libggml*|libc6|libgcc-s1|libstdc++6|libgomp1|libcuda1) ;; *) extra+=("$d") ;; esac
    done
    pkgs+=($(printf '%s\n' "${extra[@]}" | sort -u))
  fi
  say "downloading ${pkgs[*]} ..."
  download_debs() { cd "$dir/debs" && apt-get "${aptopts[@]}" -qq download "${pkgs[@]}"; }
  rm -f "$dir/debs"/*.deb
  # A mirror hiccup should not fail a CI run: try the download three times before giving up.
  for try in 1 2 3; do
    if ticking "$dir/apt/download.log" "still downloading" download_debs; then
      break
    fi
    [ "$try" = 3 ] && fail "apt-get download failed (see $dir/apt/download.log); package names in sid may have changed"
    sleep $((try * 3))
  done
fi

rm -rf "$root.new" && mkdir -p "$root.new"
for deb in "$dir/debs"/*.deb; do unpack "$deb" || fail "unpacking $deb failed"; done
# Swap the folders by renames, so a server starting meanwhile finds the old files or the new ones, never a
# half-deleted tree; the old one is removed afterwards (running servers keep the files they opened).
if [ -e "$root" ]; then
  rm -rf "$root.old" && mv "$root" "$root.old"
fi
mv "$root.new" "$root"
rm -rf "$root.old"

loader=$(find "$root" -name 'ld-linux-x86-64.so.2' -o -name 'ld-linux-aarch64.so.1' | head -n1)
[ -n "$loader" ] || fail "no dynamic loader found in the unpacked libc6"
lib=$(dirname "$(find "$root" -name 'libllama.so*' | head -n1)")
[ -d "$lib" ] || fail "libllama not found in the unpacked packages"
srv="$root/usr/bin/llama-server"
[ -e "$srv" ] || fail "llama-server not found in llama.cpp-tools"
# ggml dlopens its backends from the executable's folder, which under the loader is the loader's: link them there.
for so in "$lib"/ggml/backends*/libggml-*.so; do [ -e "$so" ] && ln -sf "$so" "$lib/$(basename "$so")"; done

mkdir -p "$dir/bin"
cat > "$wrapper.tmp" <<W
#!/bin/sh
# Generated by visor's install-engine.sh: runs Debian sid's llama-server through sid's own loader.
libs="$lib:$lib/llama"
# Containers with NVIDIA's runtime mount the driver under /usr/local/nvidia, where neither the loader nor the
# Vulkan loader looks: add its libraries and its Vulkan ICD, unless the user chose an ICD.
if [ -d /usr/local/nvidia/lib64 ]; then libs="\$libs:/usr/local/nvidia/lib64"; fi
if [ -z "\${VK_DRIVER_FILES:-}\${VK_ICD_FILENAMES:-}" ] && [ -e /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
exec "$loader" --library-path "\$libs\${VISOR_ENGINE_LIBRARY_PATH:+:\$VISOR_ENGINE_LIBRARY_PATH}" "$srv" "\$@"
W
chmod +x "$wrapper.tmp" && mv "$wrapper.tmp" "$wrapper"

ver=$("$wrapper" --version 2>&1) || fail "installed llama-server does not run: $ver"
echo "$ver" | sed -n 's/^version: /install-engine: llama-server version /p'
if [ "$gpu" != off ]; then
  devs=$("$wrapper" --list-devices 2>&1 || true)
  if echo "$devs" | grep -Eq '^ *(Vulkan|CUDA)[0-9]+:'; then
    echo "$devs" | grep -E '^ *(Vulkan|CUDA)[0-9]+:' | sed 's/^ */install-engine: GPU /'
  else
    # The CPU engine still works; visor refuses a GPU plan that would silently run on it.
    echo "install-engine: warning: the $gpu backend is installed but llama-server sees no GPU device:" >&2
    echo "$devs" | sed 's/^/  /' >&2
    echo "  check the GPU driver (NVIDIA: its Vulkan ICD json, VK_DRIVER_FILES; libEGL from glvnd), or use VISOR_ENGINE_GPU=off" >&2
  fi
fi
echo "llama-server installed: $wrapper"
