#!/usr/bin/env bash
# Java 17 and Maven, which the runtime parts need to build Beam's job-server jars (Maven Central
# does not serve the prebuilt ones this Beam needs). Installed with apt when missing and this
# runs as root; otherwise one line says what to install. --check: exit 1 when one is missing.
set -euo pipefail
missing=()
command -v java >/dev/null 2>&1 || missing+=(openjdk-17-jre-headless)
command -v mvn >/dev/null 2>&1 || missing+=(maven)
[ "${#missing[@]}" -eq 0 ] && exit 0
[ "${1:-}" = --check ] && exit 1
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "java-maven: ${missing[*]} missing: install Java 17 and Maven (Debian/Ubuntu:" \
       "sudo apt-get install openjdk-17-jre-headless maven), then run this again" >&2
  exit 1
fi
echo "java-maven: apt-get install ${missing[*]} (~200 MB, about a minute)"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
