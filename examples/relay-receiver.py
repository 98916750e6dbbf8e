#!/usr/bin/env python3
"""A tiny HTTP receiver for the relay demo: prints each delivery (headers and body) and answers 200."""
import http.server, json, sys

class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        keep = {k: v for k, v in self.headers.items() if k.lower().startswith("x-")}
        print(json.dumps({"path": self.path, "headers": keep, "body": json.loads(body or b"null")}), flush=True)
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *a): pass

http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1]) if len(sys.argv) > 1 else 9099), H).serve_forever()
