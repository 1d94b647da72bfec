// A blocking Redis connection speaking RESP2 by hand over a plain socket: the
// only transport the JVM lockers of this folder use.
import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.ByteArrayOutputStream;
import java.io.Closeable;
import java.io.EOFException;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

final class Resp implements Closeable {
    /** An error reply ("-ERR ..."): the connection itself is still usable. */
    static final class ErrorReply extends IOException {
        private static final long serialVersionUID = 1L;

        ErrorReply(String message) {
            super(message);
        }
    }

    /** Connect and read timeout unless one is given, milliseconds. */
    static final int DEFAULT_TIMEOUT_MS = 5000;
    /** Longest bulk string accepted from the server, bytes. */
    private static final int BULK_MAX = 16 << 20;

    private final Socket socket;
    private final BufferedInputStream in;
    private final BufferedOutputStream out;
    private long commands;

    Resp(String host, int port) throws IOException {
        this(host, port, DEFAULT_TIMEOUT_MS);
    }

    /** A connection whose connect and every read give up after timeoutMs. */
    Resp(String host, int port, int timeoutMs) throws IOException {
        socket = new Socket();
        try {
            socket.setTcpNoDelay(true);
            socket.setSoTimeout(timeoutMs);
            socket.connect(new InetSocketAddress(host, port), timeoutMs);
            in = new BufferedInputStream(socket.getInputStream());
            out = new BufferedOutputStream(socket.getOutputStream());
        } catch (IOException e) {
            socket.close();
            throw e;
        }
    }

    /** Commands sent on this connection so far. */
    long commands() {
        return commands;
    }

    /**
     * Sends one command and returns its reply: Long, String (status or bulk),
     * null (nil), List (array). An error reply is thrown as ErrorReply.
     */
    Object call(String... args) throws IOException {
        writeArray(args);
        out.flush();
        commands++;
        return read();
    }

    /** A command whose reply must be an integer. */
    long integer(String... args) throws IOException {
        Object r = call(args);
        if (r instanceof Long) return (Long) r;
        throw new IOException(args[0] + ": expected an integer reply, got " + r);
    }

    /** A command whose reply must be a string or nil. */
    String bulk(String... args) throws IOException {
        Object r = call(args);
        if (r == null || r instanceof String) return (String) r;
        throw new IOException(args[0] + ": expected a string reply, got " + r);
    }

    @Override
    public void close() throws IOException {
        socket.close();
    }

    private void writeArray(String[] args) throws IOException {
        out.write(('*' + Integer.toString(args.length) + "\r\n").getBytes(StandardCharsets.US_ASCII));
        for (String a : args) {
            byte[] b = a.getBytes(StandardCharsets.UTF_8);
            out.write(('$' + Integer.toString(b.length) + "\r\n").getBytes(StandardCharsets.US_ASCII));
            out.write(b);
            out.write('\r');
            out.write('\n');
        }
    }

    private Object read() throws IOException {
        int type = in.read();
        if (type < 0) throw new EOFException("connection closed by the server");
        String line = readLine();
        switch (type) {
            case '+':
                return line;
            case '-':
                throw new ErrorReply(line);
            case ':':
                return parseLong(line);
            case '$':
                return readBulk(parseLong(line));
            case '*':
                return readArray(parseLong(line));
            default:
                throw new IOException("unexpected reply type byte " + type);
        }
    }

    private String readBulk(long len) throws IOException {
        if (len == -1) return null;
        if (len < 0 || len > BULK_MAX) throw new IOException("bad bulk length " + len);
        byte[] b = in.readNBytes((int) len);
        if (b.length != len || in.read() != '\r' || in.read() != '\n')
            throw new EOFException("truncated bulk string");
        return new String(b, StandardCharsets.UTF_8);
    }

    private List<Object> readArray(long n) throws IOException {
        if (n == -1) return null;
        if (n < 0 || n > BULK_MAX) throw new IOException("bad array length " + n);
        List<Object> items = new ArrayList<>();
        for (long i = 0; i < n; i++) {
            try {
                items.add(read());
            } catch (ErrorReply e) {
                items.add(e); /* an error inside an array is an element, not a failure */
            }
        }
        return items;
    }

    private String readLine() throws IOException {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        for (;;) {
            int c = in.read();
            if (c < 0) throw new EOFException("connection closed mid-reply");
            if (c == '\r') {
                if (in.read() != '\n') throw new IOException("malformed reply line");
                return b.toString(StandardCharsets.UTF_8);
            }
            if (b.size() > BULK_MAX) throw new IOException("reply line too long");
            b.write(c);
        }
    }

    private static long parseLong(String s) throws IOException {
        try {
            return Long.parseLong(s);
        } catch (NumberFormatException e) {
            throw new IOException("bad number in reply: " + s);
        }
    }
}
