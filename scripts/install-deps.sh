#!/usr/bin/env bash
# Installs what pgrig needs on a fresh Debian 12 machine, and nothing that is
# already there. Usage: scripts/install-deps.sh [run|test]
#   run:  PostgreSQL 15 server, client and contrib, fio, python3-venv, xfsprogs
#         (mkfs.xfs for the storage lab's filesystem targets) and btrfs-progs
#         (its stripes: btrfs raid0 over several loop devices): what `make run`
#         (the quick study) and `pgrig run --fs` need
#   test: the same plus FUSE 3 with what building the pyfuse3 binding needs
#         (the lossy filesystem, pgrig[lossyfs], which the test extra installs),
#         Chromium (the report is rendered headless in a test), and
#         openssh-server, iproute2 and sudo (tests/hosts_fixture.py runs sshd in
#         network namespaces as test hosts, one account acting through sudo;
#         Debian does not start sshd here)
set -euo pipefail
want=${1:-run}
missing=()

have_pg_server() { compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; }
have_pg_contrib() { compgen -G "/usr/share/postgresql/*/extension/amcheck.control" >/dev/null; }

have_pg_server || missing+=(postgresql postgresql-client)
have_pg_contrib || missing+=(postgresql-contrib)
command -v fio >/dev/null || missing+=(fio)
command -v mkfs.xfs >/dev/null || [ -x /usr/sbin/mkfs.xfs ] || [ -x /sbin/mkfs.xfs ] || missing+=(xfsprogs)
command -v mkfs.btrfs >/dev/null || [ -x /usr/sbin/mkfs.btrfs ] || [ -x /sbin/mkfs.btrfs ] || missing+=(btrfs-progs)
python3 -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3-venv)
if [ "$want" = test ]; then
  command -v fusermount3 >/dev/null || missing+=(fuse3)
  pkg-config --exists fuse3 2>/dev/null || missing+=(libfuse3-dev)
  command -v pkg-config >/dev/null || missing+=(pkg-config)
  command -v cc >/dev/null || missing+=(gcc)
  python3 -c 'import sysconfig, os; assert os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))' 2>/dev/null \
    || missing+=(python3-dev)
  command -v chromium >/dev/null || missing+=(chromium)
  [ -x /usr/sbin/sshd ] || missing+=(openssh-server)
  command -v visudo >/dev/null || [ -x /usr/sbin/visudo ] || missing+=(sudo)
  command -v ip >/dev/null || [ -x /usr/sbin/ip ] || missing+=(iproute2)
fi

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "pgrig needs these Debian packages: ${missing[*]}" >&2
  echo "install them with: sudo apt-get install ${missing[*]}" >&2
  exit 1
fi
echo "installing: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# Debian's postgresql package creates and starts a "main" cluster; pgrig does not
# need it, and creating it is harmless, but do not let it start anything here.
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
  chmod +x /usr/sbin/policy-rc.d
  trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
