using System;
using System.Collections;
using System.Collections.Generic;
using System.Globalization;
using System.Reflection;

namespace QueueBox.Inbox
{
    public static partial class Json
    {
        /// <summary>Reads JSON text into a <typeparamref name="T"/>, numbers exactly: every
        /// number is kept as its text until it meets its target type, so a <c>decimal</c> gets
        /// all its digits, a <c>long</c> or <c>ulong</c> every digit (too large is an error, never
        /// a rounded value), and only a <c>double</c>/<c>float</c> target rounds.
        /// <para>Targets: classes and structs with a parameterless constructor (public settable
        /// properties and public fields, names matched ignoring case, unknown JSON keys
        /// skipped), arrays, <c>List&lt;T&gt;</c> and its interfaces, dictionaries keyed by string,
        /// the numeric types and <c>System.Numerics.BigInteger</c>, <c>string</c>, <c>bool</c>,
        /// <c>Guid</c>, <c>DateTime</c>/<c>DateTimeOffset</c> (ISO 8601), enums (by name or
        /// number), <c>Nullable&lt;T&gt;</c>, and <c>object</c> (dictionaries and lists; a number as
        /// long, else decimal, else double). For constructor-bound records or attributes, pass
        /// your own deserializer (System.Text.Json, Newtonsoft) where the API takes one.</para>
        /// A mismatch is a <see cref="FormatException"/> naming the path (<c>payload.items[2].qty</c>).</summary>
        public static T Deserialize<T>(string json)
        {
            return (T)Deserialize(json, typeof(T));
        }

        public static object Deserialize(string json, Type type)
        {
            return Deserialize(json, type, "$");
        }

        internal static object Deserialize(string json, Type type, string root)
        {
            if (type == null) throw new ArgumentNullException("type");
            return Bind(Parse(json ?? "", true), type, root);
        }

        private static object Bind(object v, Type t, string path)
        {
            if (t == typeof(object)) return Untyped(v);
            Type nullable = Nullable.GetUnderlyingType(t);
            if (v == null)
            {
                if (!t.IsValueType || nullable != null) return null;
                throw Mismatch(path, "null", t);
            }
            if (nullable != null) t = nullable;
            var num = v as JsonNumber;
            if (num != null) return BindNumber(num.Text, t, path);
            var s = v as string;
            if (s != null)
            {
                if (t == typeof(string)) return s;
                try
                {
                    if (t == typeof(Guid)) return Guid.Parse(s);
                    if (t == typeof(DateTimeOffset)) return DateTimeOffset.Parse(s, CultureInfo.InvariantCulture, DateTimeStyles.RoundtripKind);
                    if (t == typeof(DateTime)) return DateTime.Parse(s, CultureInfo.InvariantCulture, DateTimeStyles.RoundtripKind);
                    if (t == typeof(TimeSpan)) return TimeSpan.Parse(s, CultureInfo.InvariantCulture);
                    if (t.IsEnum) return Enum.Parse(t, s, true);
                    if (t == typeof(char) && s.Length == 1) return s[0];
                }
                catch (Exception e) when (e is FormatException || e is ArgumentException || e is OverflowException)
                {
                    throw new FormatException(path + ": \"" + s + "\" is not a " + Name(t) + " (" + e.Message + ")");
                }
                throw Mismatch(path, "a string", t);
            }
            if (v is bool)
            {
                if (t == typeof(bool)) return v;
                throw Mismatch(path, "a boolean", t);
            }
            var list = v as List<object>;
            if (list != null) return BindList(list, t, path);
            var obj = v as Dictionary<string, object>;
            if (obj != null) return BindObject(obj, t, path);
            throw Mismatch(path, v.GetType().Name, t);
        }

        private static object BindNumber(string text, Type t, string path)
        {
            if (t.IsEnum) return Enum.ToObject(t, BindNumber(text, Enum.GetUnderlyingType(t), path));
            var inv = CultureInfo.InvariantCulture;
            // Integers take integer text only (1.0 and 1e3 are refused rather than guessed at).
            bool integral = text.IndexOfAny(new[] { '.', 'e', 'E' }) < 0;
            try
            {
                if (t == typeof(decimal)) return decimal.Parse(text, NumberStyles.Float, inv);
                if (t == typeof(double)) return double.Parse(text, NumberStyles.Float, inv);
                if (t == typeof(float)) return float.Parse(text, NumberStyles.Float, inv);
                if (integral)
                {
                    if (t == typeof(long)) return long.Parse(text, NumberStyles.AllowLeadingSign, inv);
                    if (t == typeof(int)) return int.Parse(text, NumberStyles.AllowLeadingSign, inv);
                    if (t == typeof(short)) return short.Parse(text, NumberStyles.AllowLeadingSign, inv);
                    if (t == typeof(sbyte)) return sbyte.Parse(text, NumberStyles.AllowLeadingSign, inv);
                    if (t == typeof(ulong)) return ulong.Parse(text, NumberStyles.None, inv);
                    if (t == typeof(uint)) return uint.Parse(text, NumberStyles.None, inv);
                    if (t == typeof(ushort)) return ushort.Parse(text, NumberStyles.None, inv);
                    if (t == typeof(byte)) return byte.Parse(text, NumberStyles.None, inv);
                    // By name, so that the library needs no reference to System.Numerics.dll.
                    if (t.FullName == "System.Numerics.BigInteger")
                    {
                        MethodInfo parse = t.GetMethod("Parse", new[] { typeof(string), typeof(NumberStyles), typeof(IFormatProvider) });
                        return parse.Invoke(null, new object[] { text, NumberStyles.AllowLeadingSign, inv });
                    }
                }
                if (t == typeof(string)) throw Mismatch(path, "a number", t);
            }
            catch (OverflowException)
            {
                throw new FormatException(path + ": " + text + " does not fit in a " + Name(t));
            }
            catch (FormatException e) when (!e.Message.StartsWith(path, StringComparison.Ordinal))
            {
                throw new FormatException(path + ": " + text + " is not a " + Name(t));
            }
            throw new FormatException(path + ": " + text + " is not a " + Name(t));
        }

        private static object BindList(List<object> list, Type t, string path)
        {
            Type item = null;
            if (t.IsArray) item = t.GetElementType();
            else if (t.IsGenericType)
            {
                Type g = t.GetGenericTypeDefinition();
                if (g == typeof(List<>) || g == typeof(IList<>) || g == typeof(ICollection<>) || g == typeof(IEnumerable<>) ||
                    g == typeof(IReadOnlyList<>) || g == typeof(IReadOnlyCollection<>))
                    item = t.GetGenericArguments()[0];
            }
            if (item == null) throw Mismatch(path, "an array", t);
            var result = (IList)Activator.CreateInstance(typeof(List<>).MakeGenericType(item));
            for (int i = 0; i < list.Count; i++) result.Add(Bind(list[i], item, path + "[" + i + "]"));
            if (!t.IsArray) return result;
            Array a = Array.CreateInstance(item, result.Count);
            result.CopyTo(a, 0);
            return a;
        }

        private static object BindObject(Dictionary<string, object> obj, Type t, string path)
        {
            if (t.IsGenericType)
            {
                Type g = t.GetGenericTypeDefinition();
                if ((g == typeof(Dictionary<,>) || g == typeof(IDictionary<,>) || g == typeof(IReadOnlyDictionary<,>)) &&
                    t.GetGenericArguments()[0] == typeof(string))
                {
                    Type value = t.GetGenericArguments()[1];
                    var d = (IDictionary)Activator.CreateInstance(typeof(Dictionary<,>).MakeGenericType(typeof(string), value));
                    foreach (var kv in obj) d[kv.Key] = Bind(kv.Value, value, path + "." + kv.Key);
                    return d;
                }
            }
            if (t.IsPrimitive || t.IsEnum || t == typeof(string) || t == typeof(decimal) || t.IsInterface || t.IsAbstract || typeof(IEnumerable).IsAssignableFrom(t))
                throw Mismatch(path, "an object", t);
            object target;
            try
            {
                target = Activator.CreateInstance(t);
            }
            catch (MissingMethodException)
            {
                throw new FormatException(path + ": " + Name(t) + " has no public parameterless constructor; pass your own deserializer");
            }
            foreach (var kv in obj)
            {
                const BindingFlags flags = BindingFlags.Public | BindingFlags.Instance | BindingFlags.IgnoreCase;
                PropertyInfo p = t.GetProperty(kv.Key, flags);
                if (p != null && p.CanWrite && p.GetSetMethod() != null && p.GetIndexParameters().Length == 0)
                {
                    p.SetValue(target, Bind(kv.Value, p.PropertyType, path + "." + kv.Key), null);
                    continue;
                }
                FieldInfo f = t.GetField(kv.Key, flags);
                if (f != null && !f.IsInitOnly) f.SetValue(target, Bind(kv.Value, f.FieldType, path + "." + kv.Key));
                // Other keys are skipped, as System.Text.Json and Newtonsoft do by default.
            }
            return target;
        }

        /// <summary>An <c>object</c> target: dictionaries and lists, numbers as long, else
        /// decimal (28 digits), else double.</summary>
        private static object Untyped(object v)
        {
            var num = v as JsonNumber;
            if (num != null)
            {
                var inv = CultureInfo.InvariantCulture;
                long l;
                decimal m;
                if (num.Text.IndexOfAny(new[] { '.', 'e', 'E' }) < 0 && long.TryParse(num.Text, NumberStyles.AllowLeadingSign, inv, out l)) return l;
                if (decimal.TryParse(num.Text, NumberStyles.Float, inv, out m) &&
                    string.Equals(Trimmed(m.ToString(inv)), Trimmed(Plain(num.Text)), StringComparison.Ordinal)) return m;
                return double.Parse(num.Text, NumberStyles.Float, inv);
            }
            var list = v as List<object>;
            if (list != null)
            {
                for (int i = 0; i < list.Count; i++) list[i] = Untyped(list[i]);
                return list;
            }
            var obj = v as Dictionary<string, object>;
            if (obj != null)
            {
                foreach (string k in new List<string>(obj.Keys)) obj[k] = Untyped(obj[k]);
                return obj;
            }
            return v;
        }

        // decimal keeps the number only when no digit is lost: compared as plain text without
        // trailing fraction zeros. Exponent forms are left to double.
        private static string Plain(string text) { return text.IndexOfAny(new[] { 'e', 'E' }) < 0 ? text : "?"; }

        private static string Trimmed(string text)
        {
            if (text.IndexOf('.') < 0) return text;
            return text.TrimEnd('0').TrimEnd('.');
        }

        private static FormatException Mismatch(string path, string what, Type t)
        {
            return new FormatException(path + ": " + what + " cannot be read as a " + Name(t));
        }

        private static string Name(Type t)
        {
            Type n = Nullable.GetUnderlyingType(t);
            return n != null ? n.Name + "?" : t.Name;
        }
    }
}
