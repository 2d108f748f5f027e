import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

public class ReverseWords {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        List<String> words = new ArrayList<>();
        for (String w : in.readLine().trim().split("\\s+")) {
            words.add(w);
        }
        Collections.reverse(words);
        System.out.println(String.join(" ", words));
    }
}
