using System;
using System.Collections;
using System.Collections.Generic;
using System.Globalization;
using System.Text;

namespace QueueBox.Inbox
{
    /// <summary>A small JSON reader and writer for the library's boundary (options, messages,
    /// parameters, rows), so that the package needs no JSON dependency on netstandard2.0
    /// or mono. Objects read as Dictionary&lt;string, object&gt;, arrays as List&lt;object&gt;,
    /// integers that fit as long, other numbers as double. Numbers are written exactly:
    /// integers (including ulong and System.Numerics.BigInteger) digit for digit, decimal
    /// with its digits and scale, double and float as their shortest round-trip text.</summary>
    public static partial class Json
    {
        public static object Parse(string text)
        {
            return Parse(text, false);
        }

        /// <summary>With <paramref name="exact"/> every number is read as its text
        /// (<see cref="JsonNumber"/>), so that it is written back or bound digit for digit.</summary>
        internal static object Parse(string text, bool exact)
        {
            int i = 0;
            object v = ReadValue(text, ref i, exact);
            SkipWs(text, ref i);
            if (i != text.Length) throw new FormatException("trailing characters in JSON at " + i);
            return v;
        }

        public static string Serialize(object value)
        {
            var sb = new StringBuilder();
            Write(sb, value);
            return sb.ToString();
        }

        /// <summary>True when a and b are the same JSON value (numbers compared as numbers).</summary>
        public static bool DeepEquals(object a, object b)
        {
            if (a == null || b == null) return a == null && b == null;
            if (IsNumber(a) && IsNumber(b)) return Convert.ToDouble(a, CultureInfo.InvariantCulture) == Convert.ToDouble(b, CultureInfo.InvariantCulture);
            var da = a as IDictionary<string, object>;
            var db = b as IDictionary<string, object>;
            if (da != null || db != null)
            {
                if (da == null || db == null || da.Count != db.Count) return false;
                foreach (var kv in da)
                {
                    object other;
                    if (!db.TryGetValue(kv.Key, out other) || !DeepEquals(kv.Value, other)) return false;
                }
                return true;
            }
            var la = a as IList<object>;
            var lb = b as IList<object>;
            if (la != null || lb != null)
            {
                if (la == null || lb == null || la.Count != lb.Count) return false;
                for (int k = 0; k < la.Count; k++) if (!DeepEquals(la[k], lb[k])) return false;
                return true;
            }
            return a.Equals(b);
        }

        private static bool IsNumber(object o)
        {
            return o is long || o is int || o is double || o is float || o is decimal || o is short || o is ulong || o is uint;
        }

        private static void SkipWs(string s, ref int i)
        {
            while (i < s.Length && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
        }

        private static object ReadValue(string s, ref int i, bool exact)
        {
            SkipWs(s, ref i);
            if (i >= s.Length) throw new FormatException("unexpected end of JSON");
            char c = s[i];
            if (c == '{') return ReadObject(s, ref i, exact);
            if (c == '[')
            {
                i++;
                var list = new List<object>();
                SkipWs(s, ref i);
                if (i < s.Length && s[i] == ']') { i++; return list; }
                while (true)
                {
                    list.Add(ReadValue(s, ref i, exact));
                    SkipWs(s, ref i);
                    if (i < s.Length && s[i] == ',') { i++; continue; }
                    Expect(s, ref i, ']');
                    return list;
                }
            }
            if (c == '"') return ReadString(s, ref i);
            if (Literal(s, ref i, "true")) return true;
            if (Literal(s, ref i, "false")) return false;
            if (Literal(s, ref i, "null")) return null;
            int start = i;
            while (i < s.Length && "+-0123456789.eE".IndexOf(s[i]) >= 0) i++;
            string num = s.Substring(start, i - start);
            if (num.Length == 0) throw new FormatException("unexpected character '" + c + "' in JSON at " + start);
            if (exact)
            {
                // Checked as a number here so that the text written back is valid JSON.
                double ignored;
                if (!double.TryParse(num, NumberStyles.Float, CultureInfo.InvariantCulture, out ignored) || num.StartsWith("+") || num.StartsWith("."))
                    throw new FormatException("bad number '" + num + "' in JSON at " + start);
                return new JsonNumber(num);
            }
            long l;
            if (num.IndexOfAny(new[] { '.', 'e', 'E' }) < 0 && long.TryParse(num, NumberStyles.AllowLeadingSign, CultureInfo.InvariantCulture, out l)) return l;
            return double.Parse(num, NumberStyles.Float, CultureInfo.InvariantCulture);
        }

        private static Dictionary<string, object> ReadObject(string s, ref int i, bool exact)
        {
            Expect(s, ref i, '{');
            var obj = new Dictionary<string, object>();
            SkipWs(s, ref i);
            if (i < s.Length && s[i] == '}') { i++; return obj; }
            while (true)
            {
                SkipWs(s, ref i);
                string key = ReadString(s, ref i);
                SkipWs(s, ref i);
                Expect(s, ref i, ':');
                SkipWs(s, ref i);
                obj[key] = ReadValue(s, ref i, exact);
                SkipWs(s, ref i);
                if (i < s.Length && s[i] == ',') { i++; continue; }
                Expect(s, ref i, '}');
                return obj;
            }
        }

        private static bool Literal(string s, ref int i, string lit)
        {
            if (string.CompareOrdinal(s, i, lit, 0, lit.Length) != 0) return false;
            i += lit.Length;
            return true;
        }

        private static void Expect(string s, ref int i, char c)
        {
            if (i >= s.Length || s[i] != c) throw new FormatException("expected '" + c + "' in JSON at " + i);
            i++;
        }

        private static string ReadString(string s, ref int i)
        {
            Expect(s, ref i, '"');
            var sb = new StringBuilder();
            while (true)
            {
                if (i >= s.Length) throw new FormatException("unterminated JSON string");
                char c = s[i++];
                if (c == '"') return sb.ToString();
                if (c != '\\') { sb.Append(c); continue; }
                char e = s[i++];
                switch (e)
                {
                    case '"': sb.Append('"'); break;
                    case '\\': sb.Append('\\'); break;
                    case '/': sb.Append('/'); break;
                    case 'b': sb.Append('\b'); break;
                    case 'f': sb.Append('\f'); break;
                    case 'n': sb.Append('\n'); break;
                    case 'r': sb.Append('\r'); break;
                    case 't': sb.Append('\t'); break;
                    case 'u': sb.Append((char)int.Parse(s.Substring(i, 4), NumberStyles.HexNumber, CultureInfo.InvariantCulture)); i += 4; break;
                    default: throw new FormatException("bad escape in JSON string");
                }
            }
        }

        private static void Write(StringBuilder sb, object v)
        {
            if (v == null) { sb.Append("null"); return; }
            if (v is string) { WriteString(sb, (string)v); return; }
            if (v is bool) { sb.Append((bool)v ? "true" : "false"); return; }
            if (v is Guid) { WriteString(sb, v.ToString()); return; }
            if (v is DateTime) { WriteString(sb, ((DateTime)v).ToUniversalTime().ToString("o", CultureInfo.InvariantCulture)); return; }
            if (v is DateTimeOffset) { WriteString(sb, ((DateTimeOffset)v).ToString("o", CultureInfo.InvariantCulture)); return; }
            if (v is Enum) { WriteString(sb, v.ToString()); return; }
            if (v is double || v is float)
            {
                double d = Convert.ToDouble(v, CultureInfo.InvariantCulture);
                if (double.IsNaN(d) || double.IsInfinity(d)) throw new ArgumentException("JSON has no NaN or infinity");
                sb.Append(d.ToString("R", CultureInfo.InvariantCulture));
                return;
            }
            if (v is decimal) { sb.Append(((decimal)v).ToString(CultureInfo.InvariantCulture)); return; }
            if (v is JsonNumber) { sb.Append(((JsonNumber)v).Text); return; }
            // System.Numerics.BigInteger, every digit; matched by name so that the library needs
            // no reference to System.Numerics.dll (mono's mcs does not add one by default).
            if (v.GetType().FullName == "System.Numerics.BigInteger")
            {
                sb.Append(((IFormattable)v).ToString("R", CultureInfo.InvariantCulture));
                return;
            }
            if (v is sbyte || v is byte || v is short || v is ushort || v is int || v is uint || v is long || v is ulong)
            {
                sb.Append(Convert.ToString(v, CultureInfo.InvariantCulture));
                return;
            }
            var dict = v as IDictionary;
            if (dict != null)
            {
                sb.Append('{');
                bool first = true;
                foreach (DictionaryEntry kv in dict)
                {
                    if (!first) sb.Append(',');
                    first = false;
                    WriteString(sb, Convert.ToString(kv.Key, CultureInfo.InvariantCulture));
                    sb.Append(':');
                    Write(sb, kv.Value);
                }
                sb.Append('}');
                return;
            }
            var seq = v as IEnumerable;
            if (seq != null)
            {
                sb.Append('[');
                bool first = true;
                foreach (object item in seq)
                {
                    if (!first) sb.Append(',');
                    first = false;
                    Write(sb, item);
                }
                sb.Append(']');
                return;
            }
            WriteString(sb, Convert.ToString(v, CultureInfo.InvariantCulture));
        }

        private static void WriteString(StringBuilder sb, string s)
        {
            sb.Append('"');
            foreach (char c in s)
            {
                switch (c)
                {
                    case '"': sb.Append("\\\""); break;
                    case '\\': sb.Append("\\\\"); break;
                    case '\n': sb.Append("\\n"); break;
                    case '\r': sb.Append("\\r"); break;
                    case '\t': sb.Append("\\t"); break;
                    default:
                        if (c < 0x20) sb.Append("\\u").Append(((int)c).ToString("x4", CultureInfo.InvariantCulture));
                        else sb.Append(c);
                        break;
                }
            }
            sb.Append('"');
        }
    }

    /// <summary>A JSON number kept as its text (<see cref="Json.Parse(string, bool)"/> exact mode).</summary>
    internal sealed class JsonNumber
    {
        internal JsonNumber(string text) { Text = text; }
        internal readonly string Text;
        public override string ToString() { return Text; }
    }
}
