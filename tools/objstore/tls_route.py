"""A TLS-terminating CONNECT proxy that sends TensorFlow's gs:// traffic to a local GCS emulator.

TensorFlow 2.21's GCS filesystem has its endpoints compiled in (https://www.googleapis.com/storage/v1/,
https://www.googleapis.com/upload/storage/v1/, https://storage.googleapis.com/<bucket>/<object>)
and no emulator variable. Its libcurl honours HTTPS_PROXY and CURL_CA_BUNDLE, so:

    HTTPS_PROXY=http://127.0.0.1:<this port>  CURL_CA_BUNDLE=<ca.pem>  GOOGLE_AUTH_TOKEN_FOR_TESTING=x

makes every gs:// request a CONNECT to this proxy, which answers the TLS handshake with a
certificate for the Google host names signed by its own CA and relays the decrypted bytes to the
emulator (plain HTTP). Loopback only. Test plumbing: nothing in the product uses it.

    python tls_route.py --upstream http://127.0.0.1:PORT --port P --certs DIR
"""

import argparse
import datetime
import os
import select
import socket
import ssl
import sys
import threading
import urllib.parse

HOSTS = ("www.googleapis.com", "storage.googleapis.com", "oauth2.googleapis.com")


def make_certs(directory: str):
    """(ca.pem, leaf.pem, leaf.key) in directory, made once with `cryptography`."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    os.makedirs(directory, exist_ok=True)
    ca_path, leaf_path, key_path = (os.path.join(directory, n) for n in ("ca.pem", "leaf.pem", "leaf.key"))
    if all(os.path.exists(p) for p in (ca_path, leaf_path, key_path)):
        return ca_path, leaf_path, key_path
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "objstore test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=30))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    leaf_key = ec.generate_private_key(ec.SECP256R1())
    leaf = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, HOSTS[0])]))
            .issuer_name(ca_name).public_key(leaf_key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(h) for h in HOSTS]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    with open(ca_path, "wb") as handle:
        handle.write(ca.public_bytes(serialization.Encoding.PEM))
    with open(leaf_path, "wb") as handle:
        handle.write(leaf.public_bytes(serialization.Encoding.PEM))
    with open(key_path, "wb") as handle:
        handle.write(leaf_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption()))
    return ca_path, leaf_path, key_path


def relay(a: socket.socket, b: socket.socket):
    sockets = [a, b]
    try:
        while True:
            # TLS sockets may hold decrypted bytes that select() cannot see
            ready = [s for s in sockets if isinstance(s, ssl.SSLSocket) and s.pending()]
            if not ready:
                ready, _, _ = select.select(sockets, [], [], 300)
                if not ready:
                    return
            for source in ready:
                data = source.recv(65536)
                if not data:
                    return
                (b if source is a else a).sendall(data)
    except OSError:
        return
    finally:
        for s in sockets:
            try:
                s.close()
            except OSError:
                pass


def handle(client: socket.socket, context: ssl.SSLContext, upstream):
    try:
        request = b""
        while b"\r\n\r\n" not in request:
            chunk = client.recv(4096)
            if not chunk:
                client.close()
                return
            request += chunk
        line = request.split(b"\r\n", 1)[0].decode()
        method, target, version = line.split(" ", 2)
        parsed = urllib.parse.urlsplit(target)
        if method != "CONNECT" and parsed.scheme == "http" and parsed.hostname in HOSTS:
            # A plain-HTTP proxy request (the emulator's resumable-upload Location says http://):
            # origin-form request line, one request per connection, relayed as is.
            head, rest = request.split(b"\r\n\r\n", 1)
            lines = head.split(b"\r\n")[1:]
            lines = [l for l in lines if not l.lower().startswith((b"connection:", b"proxy-connection:"))]
            path = parsed.path + ("?" + parsed.query if parsed.query else "")
            head = b"\r\n".join([f"{method} {path} {version}".encode(), *lines, b"Connection: close"])
            backend = socket.create_connection(upstream)
            backend.sendall(head + b"\r\n\r\n" + rest)
            relay(client, backend)
            return
        if method != "CONNECT" or target.split(":")[0] not in HOSTS:
            client.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
            client.close()
            return
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        tls = context.wrap_socket(client, server_side=True)
        backend = socket.create_connection(upstream)
        relay(tls, backend)
    except (OSError, ValueError, ssl.SSLError) as error:
        print("mitm: connection failed:", error, file=sys.stderr, flush=True)
        client.close()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--certs", required=True)
    args = parser.parse_args(argv)
    _, leaf, key = make_certs(args.certs)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(leaf, key)
    parsed = urllib.parse.urlsplit(args.upstream)
    upstream = (parsed.hostname, parsed.port)
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", args.port))
    server.listen(64)
    print(f"mitm on 127.0.0.1:{server.getsockname()[1]} -> {args.upstream}", flush=True)
    while True:
        client, _ = server.accept()
        threading.Thread(target=handle, args=(client, context, upstream), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
