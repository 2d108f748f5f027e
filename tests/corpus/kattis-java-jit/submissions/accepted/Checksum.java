import java.io.*;
import java.util.*;

public class Checksum {
    static long rounds(int[] a, int times) {
        long total = 0;
        for (int r = 0; r < times; r++) {
            int s = 0;
            for (int i = 0; i < a.length; i++) {
                s += a[i] * 31 + (a[i] ^ r);
            }
            total += s;
        }
        return total;
    }

    public static void main(String[] args) throws IOException {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        StringTokenizer st = new StringTokenizer(in.readLine());
        int n = Integer.parseInt(st.nextToken()), times = Integer.parseInt(st.nextToken());
        int[] a = new int[n];
        for (int i = 0; i < n; i++) a[i] = (int) ((i * 2654435761L) >>> 7);
        System.out.println(rounds(a, times));
    }
}
