#!/usr/bin/env bash
# Makes the certificates the TLS, authorization and monitoring tests use, with
# openssl(1), in DIR (never checked in). Each NAME has NAME.pem and NAME.key.
#   ca            the test CA; server, client-a, client-b, client-c, expired are signed by it
#   server        CN lockd.test, SAN DNS:lockd.test, DNS:localhost, IP:127.0.0.1
#   client-a      SAN URI:spiffe://lockd.test/client-a and DNS:a.lockd.test (identity: the URI)
#   client-b      SAN DNS:client-b.test (identity: the DNS name)
#   client-c      CN client-c, no SAN (identity: the CN)
#   expired       CN expired, valid only in 2020
#   ca2           another CA; server2 (same names as server) and other (CN other) are signed by it
# Usage: make_test_certs.sh DIR
set -euo pipefail
dir=$1
mkdir -p "$dir"
cd "$dir"
export OPENSSL_CONF=/dev/null

newkey() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1.key" 2>/dev/null; }

make_ca() {  # NAME CN
  newkey "$1"
  openssl req -x509 -new -key "$1.key" -subj "/CN=$2" -days 2 -out "$1.pem" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
}

sign() {  # NAME CA SUBJECT EXTENSIONS
  newkey "$1"
  openssl req -new -key "$1.key" -subj "$3" -out "$1.csr"
  printf '%s\n' "$4" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -CAcreateserial -days 2 \
    -extfile "$1.ext" -out "$1.pem" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}

server_ext='subjectAltName=DNS:lockd.test,DNS:localhost,IP:127.0.0.1
extendedKeyUsage=serverAuth'
make_ca ca "lockd test CA"
make_ca ca2 "another test CA"
sign server ca "/CN=lockd.test" "$server_ext"
sign server2 ca2 "/CN=lockd.test" "$server_ext"
sign client-a ca "/CN=client-a" 'subjectAltName=URI:spiffe://lockd.test/client-a,DNS:a.lockd.test
extendedKeyUsage=clientAuth'
sign client-b ca "/CN=client-b" 'subjectAltName=DNS:client-b.test
extendedKeyUsage=clientAuth'
sign client-c ca "/CN=client-c" 'extendedKeyUsage=clientAuth'
sign other ca2 "/CN=other" 'extendedKeyUsage=clientAuth'

# An expired certificate: `openssl ca` is the one command that sets both dates.
newkey expired
openssl req -new -key expired.key -subj "/CN=expired" -out expired.csr
mkdir -p ca-db
: > ca-db/index.txt
cat > ca-db/ca.cnf <<CNF
[ca]
default_ca = test
[test]
database = ca-db/index.txt
new_certs_dir = ca-db
serial = ca-db/serial
default_md = sha256
policy = any
copy_extensions = none
[any]
commonName = supplied
[ext]
extendedKeyUsage = clientAuth
CNF
echo 01 > ca-db/serial
openssl ca -batch -config ca-db/ca.cnf -cert ca.pem -keyfile ca.key -in expired.csr \
  -startdate 20200101000000Z -enddate 20200102000000Z -extensions ext -notext \
  -out expired.pem 2>/dev/null
rm -rf ca-db expired.csr ./*.srl
