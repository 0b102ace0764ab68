#!/bin/sh
# Builds the continuityd .deb into dist/ and lists what it holds.
#
#   packaging/build-deb.sh                 # for this machine's architecture
#   ARCH=arm64 VERSION=0.1.0 packaging/build-deb.sh
#   PACKAGER=rpm packaging/build-deb.sh    # the .rpm instead
#
# ARCH is a GOARCH (default: go env GOARCH); VERSION defaults to the latest
# git tag without its "v", else 0.0.0~dev. Needs Go and network access to the
# module proxy (nfpm runs through `go run`; go.mod is not touched). Prints the
# package's path on the last line.
set -eu

cd "$(dirname "$0")/.."

NFPM=github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.45.2
ARCH=${ARCH:-$(go env GOARCH)}
PACKAGER=${PACKAGER:-deb}
if [ -z "${VERSION:-}" ]; then
	VERSION=$(git describe --tags --abbrev=0 2>/dev/null | sed 's/^v//') || true
	VERSION=${VERSION:-0.0.0~dev}
fi
export ARCH VERSION

echo "== continuityd and continuityd-daemon $VERSION for linux/$ARCH"
CGO_ENABLED=0 GOOS=linux GOARCH=$ARCH go build -trimpath \
	-ldflags "-s -w -X main.version=$VERSION" \
	-o "dist/linux_$ARCH/" ./cmd/continuityd ./cmd/continuityd-daemon
go run ./packaging/gen packaging/generated

echo "== nfpm ($PACKAGER)"
mkdir -p dist
# nfpm is built for this machine, whatever ARCH the package is for.
GOOS='' GOARCH='' go run "$NFPM" pkg --config packaging/nfpm.yaml --packager "$PACKAGER" --target dist/ >dist/nfpm.log 2>&1 || {
	cat dist/nfpm.log >&2
	exit 1
}
pkg=$(sed -n 's/.*created package: //p' dist/nfpm.log | tail -n 1)
[ -n "$pkg" ] && [ -f "$pkg" ] || {
	echo "nfpm made no package:" >&2
	cat dist/nfpm.log >&2
	exit 1
}

if [ "$PACKAGER" = deb ] && command -v dpkg-deb >/dev/null 2>&1; then
	echo "== dpkg-deb -c $pkg"
	dpkg-deb -c "$pkg"
fi
echo "$pkg"
