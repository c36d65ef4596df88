#!/bin/sh
# tls_certs.sh DIR — the certificates of the TLS tests, made with the
# openssl CLI at test time (nothing secret is kept in the repository):
#   ca.pem/ca.key            the test CA
#   server.pem/server.key    signed by it, for localhost and 127.0.0.1 (subjectAltName)
#   expired.pem              the same key, valid only in January 2020 (openssl ca -startdate/-enddate)
#   wrong_ca.pem             another CA that signed nothing here
#   client.pem/client.key    a client certificate signed by ca.pem
#   other_key.key            a key that matches no certificate
set -eu
d=$1
mkdir -p "$d"
cd "$d"
rm -rf db && mkdir -p db/new && : > db/index.txt && echo 1000 > db/serial
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
key ca.key; key wrong_ca.key; key server.key; key client.key; key other_key.key
openssl req -x509 -new -key ca.key -out ca.pem -days 30 -subj "/CN=physd test CA" 2>/dev/null
openssl req -x509 -new -key wrong_ca.key -out wrong_ca.pem -days 30 -subj "/CN=physd wrong CA" 2>/dev/null
cat > ca.cnf <<'CNF'
[ ca ]
default_ca = test_ca
[ test_ca ]
database = db/index.txt
new_certs_dir = db/new
serial = db/serial
certificate = ca.pem
private_key = ca.key
default_md = sha256
policy = any
unique_subject = no
[ any ]
commonName = supplied
[ server ]
subjectAltName = DNS:localhost,IP:127.0.0.1
extendedKeyUsage = serverAuth
[ client ]
extendedKeyUsage = clientAuth
CNF
openssl req -new -key server.key -out server.csr -subj "/CN=localhost" 2>/dev/null
openssl req -new -key client.key -out client.csr -subj "/CN=physd test client" 2>/dev/null
sign() { openssl ca -batch -notext -config ca.cnf -extensions "$1" -in "$2" -out "$3" "$4" "$5" "$6" "$7" 2>/dev/null; }
sign server server.csr server.pem -startdate "$(date -u -d '-1 day' +%Y%m%d%H%M%SZ)" -enddate "$(date -u -d '+30 days' +%Y%m%d%H%M%SZ)"
sign server server.csr expired.pem -startdate 20200101000000Z -enddate 20200201000000Z
sign client client.csr client.pem -startdate "$(date -u -d '-1 day' +%Y%m%d%H%M%SZ)" -enddate "$(date -u -d '+30 days' +%Y%m%d%H%M%SZ)"
openssl verify -CAfile ca.pem server.pem client.pem >/dev/null
echo "tls_certs: certificates in $d"
