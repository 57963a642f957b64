package otelprof.tests;

import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.channels.Selector;
import java.nio.channels.ServerSocketChannel;

/**
 * Two threads that wait in native code the way a server's do, RUNNABLE all the while: an
 * {@code acceptor} blocked in {@code ServerSocket.accept} (accept(2)) and a {@code poller}
 * blocked in {@code Selector.select} (epoll_wait(2)), for {@code seconds}; no connection
 * ever comes.
 *
 * <p>Usage: {@code NativeWait <seconds>}
 */
public final class NativeWait {
    public static void main(String[] args) throws Exception {
        long millis = (long) (Double.parseDouble(args[0]) * 1000);
        ServerSocket server = new ServerSocket(0, 50, java.net.InetAddress.getLoopbackAddress());
        Thread acceptor = new Thread(() -> {
            try {
                server.accept();
            } catch (Exception closed) {
                // The server socket closed at the end.
            }
        }, "acceptor");
        ServerSocketChannel channel = ServerSocketChannel.open();
        channel.bind(new InetSocketAddress(java.net.InetAddress.getLoopbackAddress(), 0));
        channel.configureBlocking(false);
        Selector selector = Selector.open();
        channel.register(selector, java.nio.channels.SelectionKey.OP_ACCEPT);
        Thread poller = new Thread(() -> {
            try {
                while (!Thread.currentThread().isInterrupted()) {
                    selector.select();
                }
            } catch (Exception closed) {
                // The selector closed at the end.
            }
        }, "poller");
        acceptor.start();
        poller.start();
        Thread.sleep(millis);
        server.close();
        poller.interrupt();
        selector.wakeup();
        acceptor.join();
        poller.join();
        selector.close();
        channel.close();
        System.out.println("done");
    }
}
