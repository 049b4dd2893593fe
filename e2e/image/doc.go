// Package image checks tally's container image, the OCI archive that
// `make image` writes (bin/tally-image.tar) from the Dockerfile at the
// repository's root. Its test reads the archive alone, with no container
// engine: the image's name, its config (entrypoint, command, numeric
// non-root user, platform), its single layer (the binary /tally and
// nothing else), the binary itself (static, stripped, built with
// CGO_ENABLED=0 and -trimpath), and runs that binary from the unpacked
// layer: inside a chroot of it as the image's user when the test runs as
// root, as a container would, directly otherwise.
//
// The test skips unless TALLY_IMAGE names the archive; `make image-test`
// builds the image and runs it with TALLY_IMAGE and TALLY_IMAGE_REF set.
package image
